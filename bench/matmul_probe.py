#!/usr/bin/env python3
"""Where a decode step's time goes on this GPU machine: small bf16 linears
(the shapes of a Qwen2.5-Coder-1.5B decode step) timed with CUDA events,
under each BLAS backend PyTorch offers, and the GPU clocks around them."""
import subprocess

import torch
import torch.nn.functional as F


def clocks(tag):
    q = "clocks.sm,clocks.mem,clocks.max.sm,power.draw,pstate,clocks_throttle_reasons.active"
    out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    print(f"{tag}: {out}")


def timed(fn, reps=200):
    for _ in range(10):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1e3  # us


clocks("idle")
shapes = [(1, 1536, 1536), (64, 1536, 1536), (64, 1536, 8960), (64, 8960, 1536),
          (256, 1536, 8960), (64, 1536, 151936), (512, 1536, 8960)]
for backend in ["default", "cublas", "cublaslt"]:
    if backend != "default":
        try:
            torch.backends.cuda.preferred_blas_library(backend)
        except Exception as e:  # noqa: BLE001
            print(backend, "unavailable:", e)
            continue
    for dtype in [torch.bfloat16, torch.float32]:
        row = []
        for m, k, n in shapes:
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            w = torch.randn(n, k, device="cuda", dtype=dtype)
            us = timed(lambda: F.linear(a, w))
            gbs = (n * k + m * k + m * n) * a.element_size() / us / 1e3
            row.append(f"[{m}x{k}]x[{n}]: {us:.1f}us {gbs:.0f}GB/s")
        print(backend, str(dtype).split(".")[1], "; ".join(row))
clocks("after matmuls")
x = torch.randn(64, 1536, device="cuda", dtype=torch.bfloat16)
print(f"elementwise add [64x1536] bf16: {timed(lambda: x.add_(1)):.1f}us")
big = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
dst = torch.empty_like(big)
us = timed(lambda: dst.copy_(big), reps=20)
print(f"copy 1 GiB: {us:.0f}us, {2 * (1 << 30) / us / 1e3:.0f} GB/s read+write")
clocks("end")
