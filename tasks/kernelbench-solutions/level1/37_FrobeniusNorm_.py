# x / ||x||_F over the whole tensor. Two launches over a fixed grid of P
# persistent programs (P <= 1024, a few per SM), each striding over BLOCK-wide
# blocks:
#   pass 1: each program writes its fp32 partial sum of squares;
#   pass 2: each program adds up the P partials (4 KB, from L2) in a fixed
#   order, takes the square root and scales its blocks.
# Deterministic, no atomics, two reads and one write per element. Offsets are
# int64 since the full-size tensor is close to 2**31 elements.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sumsq_partial_kernel(x_ptr, part_ptr, n, iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for it in range(0, iters):
        offs = (pid + it * nprog).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        acc += x * x
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def frob_scale_kernel(x_ptr, out_ptr, part_ptr, n, iters,
                      BLOCK: tl.constexpr, PBLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    k = tl.arange(0, PBLOCK)
    p = tl.load(part_ptr + k, mask=k < nprog, other=0.0)
    norm = tl.sqrt(tl.sum(p, axis=0))
    for it in range(0, iters):
        offs = (pid + it * nprog).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + offs, (x / norm).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        BLOCK = 4096
        nblocks = triton.cdiv(n, BLOCK)
        P = min(nblocks, 1024)
        iters = triton.cdiv(nblocks, P)
        part = torch.empty(P, device=x.device, dtype=torch.float32)
        out = torch.empty_like(x)
        sumsq_partial_kernel[(P,)](x, part, n, iters, BLOCK=BLOCK, num_warps=8)
        frob_scale_kernel[(P,)](x, out, part, n, iters, BLOCK=BLOCK,
                                PBLOCK=max(16, triton.next_power_of_2(P)), num_warps=8)
        return out
