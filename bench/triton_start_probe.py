#!/usr/bin/env python3
"""Where a candidate process forked from a parent with torch and Triton imported
spends its first seconds on the GPU: the CUDA context, the first Triton launch
with an empty and with a warm Triton cache, a second kernel signature. Also
shows that touching Triton's driver before fork breaks CUDA in the child (why
the verifier fills its base cache in a child of the zygote, never in it).
usage: python3 bench/triton_start_probe.py"""
import os, sys, time, tempfile, shutil, subprocess
t0 = time.perf_counter()
import torch, triton, triton.language as tl
print(f"import torch+triton {1e3*(time.perf_counter()-t0):.0f} ms  triton {triton.__version__}", flush=True)

SRC = '''
import triton, triton.language as tl, torch
@triton.jit
def k(x, y, n, B: tl.constexpr):
    o = tl.program_id(0)*B + tl.arange(0, B)
    tl.store(y+o, tl.maximum(tl.load(x+o, mask=o<n), 0), mask=o<n)
@triton.jit
def k2(x, y, n, s, B: tl.constexpr):
    o = tl.program_id(0)*B + tl.arange(0, B)
    tl.store(y+o, tl.load(x+o, mask=o<n)*s, mask=o<n)
'''
def child(tag, warm_driver_in_parent):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        out = []
        def mark(name, t):
            out.append(f"{name} {1e3*(time.perf_counter()-t):.0f}ms")
        t = time.perf_counter(); torch.cuda.init(); x = torch.randn(4096, device="cuda"); torch.cuda.synchronize(); mark("cuda_init", t)
        import importlib.util
        path = os.path.join(tempfile.mkdtemp(), "cand.py"); open(path, "w").write(SRC)
        spec = importlib.util.spec_from_file_location("cand", path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        ns = m.__dict__
        y = torch.empty_like(x)
        t = time.perf_counter(); ns["k"][(4,)](x, y, 4096, B=1024); torch.cuda.synchronize(); mark("first_kernel", t)
        t = time.perf_counter(); ns["k"][(4,)](x, y, 4000, B=1024); torch.cuda.synchronize(); mark("same_sig_new_n", t)
        t = time.perf_counter(); ns["k"][(4,)](x, y, 4001, B=1024); torch.cuda.synchronize(); mark("n_odd_respecialise", t)
        t = time.perf_counter(); ns["k2"][(4,)](x, y, 4096, 2.0, B=1024); torch.cuda.synchronize(); mark("second_kernel", t)
        t = time.perf_counter(); ns["k"][(4,)](x, y, 4096, B=1024); torch.cuda.synchronize(); mark("cached_launch", t)
        os.write(w, (tag + ": " + "  ".join(out)).encode()); os._exit(0)
    os.close(w); os.waitpid(pid, 0)
    print(os.read(r, 10000).decode(), flush=True)

cache = tempfile.mkdtemp()
os.environ["TRITON_CACHE_DIR"] = cache
child("cold cache, cold driver", False)
print("cache files:", sorted({f.split('.')[-1] for d, _, fs in os.walk(cache) for f in fs}), flush=True)
print([f for d, _, fs in os.walk(cache) for f in fs if f.endswith('.so')], flush=True)
child("warm cache", False)
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
t = time.perf_counter()
try:
    d = triton.runtime.driver.active
    u = d.utils
    print(f"parent: driver.active.utils {1e3*(time.perf_counter()-t):.0f} ms, cuda initialised in parent: {torch.cuda.is_initialized()}", flush=True)
except Exception as e:
    print("parent driver warm failed", e)
child("cold kernel cache, driver warmed pre-fork", True)
