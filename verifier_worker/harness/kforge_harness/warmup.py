"""Trusted warm-up of a candidate process before it is given a candidate.

A fresh candidate process on a GPU pays, before the candidate's own work,
for CUDA's context (~0.3 s on an H100) and Triton's first launch: its
driver utilities module and a launcher stub, both C built with the host
compiler, and the runtime's first-call set-up (~1.5 s with an empty cache,
~0.6 s with a warm one, measured on an H100 with Triton 3.6). The verifier
keeps spare processes that have paid this already (warm_up in the sandbox
config), and fills a trusted base cache once at start (`fill_base_cache`,
run in a child of the zygote that never sees candidate code); each sandbox
gets a copy of it, never a link, so a candidate cannot change what the
next one reads.

The kernels below only cover common launcher signatures (the launcher
stub Triton builds depends on the argument types, not on the kernel body):
a candidate whose kernel takes the same argument types finds its launcher
already built.
"""

import os

import torch

from .device import make_current

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only interpreters
    triton = None

if triton is not None:

    @triton.jit
    def _copy2(src, dst, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)

    @triton.jit
    def _add3(a, b, out, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out + offsets, tl.load(a + offsets, mask=mask) + tl.load(b + offsets, mask=mask),
                 mask=mask)

    @triton.jit
    def _rows2(src, dst, rows, cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offsets = tl.arange(0, BLOCK)
        mask = (offsets < cols) & (row < rows)
        tl.store(dst + row * cols + offsets, tl.load(src + row * cols + offsets, mask=mask),
                 mask=mask)

    @triton.jit
    def _rows_stride2(src, dst, cols, stride, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offsets = tl.arange(0, BLOCK)
        mask = offsets < cols
        tl.store(dst + row * stride + offsets, tl.load(src + row * stride + offsets, mask=mask),
                 mask=mask)

    @triton.jit
    def _scale2(src, dst, n, scale, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(dst + offsets, tl.load(src + offsets, mask=mask) * scale, mask=mask)

    @triton.jit
    def _rows_eps3(src, weight, dst, cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offsets = tl.arange(0, BLOCK)
        mask = offsets < cols
        x = tl.load(src + row * cols + offsets, mask=mask)
        tl.store(dst + row * cols + offsets, x * tl.load(weight + offsets, mask=mask) + eps,
                 mask=mask)


def _launch_all(device, every_signature):
    make_current(device)
    x = torch.zeros(4096, device=device)
    y = torch.empty_like(x)
    z = torch.empty_like(x)
    if triton is not None:
        # n = 4096 and n = 4000: Triton specialises integers divisible by 16.
        for n in (4096, 4000):
            _copy2[(4,)](x, y, n, BLOCK=1024)
            if not every_signature:
                break
            _add3[(4,)](x, y, z, n, BLOCK=1024)
            _rows2[(4,)](x, y, 4, n // 4, BLOCK=1024)
            _rows_stride2[(4,)](x, y, n // 4, n // 4, BLOCK=1024)
            _scale2[(4,)](x, y, n, 0.5, BLOCK=1024)
            _rows_eps3[(4,)](x, y, z, n // 4, 1e-6, BLOCK=1024)
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def warm_process(device):
    """In a spare candidate process, before any candidate code: the CUDA
    context and one Triton launch (its launcher comes from the base cache
    copied into the sandbox)."""
    if str(device).startswith("cuda"):
        _launch_all(device, every_signature=False)


def fill_base_cache(cache_dir, device):
    """In a trusted child of the zygote: builds the common launchers and the
    driver utilities into `cache_dir`."""
    os.environ["TRITON_CACHE_DIR"] = cache_dir
    _launch_all(device, every_signature=True)
