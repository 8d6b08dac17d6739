#!/usr/bin/env python3
"""How long one small kernel launch takes on this GPU machine, eagerly and
replayed from a CUDA graph: the floor under every decode step that is not
captured (a 1.5B decoder step is ~600 launches)."""
import os
import time

import torch

print("CUDA_LAUNCH_BLOCKING", os.environ.get("CUDA_LAUNCH_BLOCKING"), "torch", torch.__version__,
      "threads", torch.get_num_threads(), "cpus", os.cpu_count())
x = torch.zeros(1024, device="cuda")
for _ in range(100):
    x.add_(1)
torch.cuda.synchronize()
n = 5000
t = time.perf_counter()
for _ in range(n):
    x.add_(1)
torch.cuda.synchronize()
eager = (time.perf_counter() - t) / n
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    with torch.cuda.graph(g):
        for _ in range(100):
            x.add_(1)
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(n // 100):
    g.replay()
torch.cuda.synchronize()
graph = (time.perf_counter() - t) / n
a = torch.randn(64, 1536, device="cuda", dtype=torch.bfloat16)
w = torch.randn(8960, 1536, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(1000):
    torch.nn.functional.linear(a, w)
torch.cuda.synchronize()
lin = (time.perf_counter() - t) / 1000
print(f"eager launch {eager * 1e6:.1f} us, graph-replayed kernel {graph * 1e6:.1f} us, "
      f"linear [64,1536]x[8960,1536] {lin * 1e6:.1f} us")
