#!/usr/bin/env python3
"""Do Triton's JIT compiles overlap when a candidate's calls on new shapes and
dtypes run in threads? The verifier's multi-input stage meets three compiles
of the same kernel per correct candidate (the tiny set, a ragged shape, a
bfloat16 set: about 0.7-1.0 s each, one after another). This probe compiles
the same three specialisations of fresh kernels (new source each round, an
empty Triton cache) serially and then in three threads, and prints both
wall times; also whether triton.runtime has an async compile mode.
usage: python3 bench/triton_thread_compile_probe.py [--rounds 3]"""
import argparse
import importlib.util
import os
import sys
import tempfile
import threading
import time

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="kf-triton-probe-")
import torch  # noqa: E402
import triton  # noqa: E402

SRC = '''
import torch, triton, triton.language as tl
@triton.jit
def softmax_{tag}(x_ptr, y_ptr, n_cols, stride, B: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, B)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0) + {k}.0 * 0.0
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride + offs, y.to(y_ptr.dtype.element_ty), mask=mask)

def run(x):
    y = torch.empty_like(x)
    B = triton.next_power_of_2(x.shape[1])
    softmax_{tag}[(x.shape[0],)](x, y, x.shape[1], x.stride(0), B=B)
    return y
'''


def fresh_module(tag, k):
    path = os.path.join(tempfile.mkdtemp(), f"cand_{tag}.py")
    with open(path, "w") as f:
        f.write(SRC.format(tag=tag, k=k))
    spec = importlib.util.spec_from_file_location(f"cand_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs():
    return [torch.randn(16, 1024, device="cuda"),              # tiny, aligned
            torch.randn(13, 1000, device="cuda")[:, :999],     # ragged, odd stride
            torch.randn(16, 1024, device="cuda", dtype=torch.bfloat16)]


def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"torch {torch.__version__} triton {triton.__version__} "
          f"{torch.cuda.get_device_name()} cpus {len(os.sched_getaffinity(0))}", flush=True)
    try:
        from triton.runtime import _async_compile  # noqa: F401
        print("triton.runtime._async_compile: present")
    except ImportError:
        print("triton.runtime._async_compile: absent")
    xs = inputs()
    fresh_module("warm", 0).run(xs[0])  # CUDA context, Triton's driver
    for r in range(args.rounds):
        serial = fresh_module(f"s{r}", r + 1)
        s = timed(lambda: [serial.run(x) for x in xs])
        threaded = fresh_module(f"t{r}", r + 101)
        errors = []

        def one(x):
            try:
                threaded.run(x)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        def all_threads():
            ts = [threading.Thread(target=one, args=(x,)) for x in xs]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        t = timed(all_threads)
        ok = all(torch.allclose(threaded.run(x).float(), torch.softmax(x.float(), 1), atol=2e-2)
                 for x in xs)
        print(f"round {r}: three compiles serially {s:.3f} s, in three threads {t:.3f} s "
              f"({s / t:.2f}x), threaded outputs right: {ok}, errors: {errors}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
