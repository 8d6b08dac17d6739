# torch.mean(x, dim) over dim `dim`
# (1 for the task: (128, 4096, 4095) -> (128, 4095)).
# The input is viewed as (outer, R, inner) with R the reduced dim.
# inner > 1 (the task): each program owns one outer index and BLOCK_I
#   contiguous inner positions and walks down R in [BLOCK_R, BLOCK_I] tiles, so
#   every load is a coalesced run of memory; the tile-shaped accumulator is
#   reduced over axis 0 only once, at the end. BLOCK_I is 32 (128-byte rows of
#   fp32) so there are enough programs at batch 1, and BLOCK_R 256 keeps many
#   loads in flight per program.
# inner == 1 (last dim): one program per row, contiguous BLOCK-wide chunks.
# Accumulation in fp32, divided by R in the kernel, stored in the input dtype.
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_dim_kernel(x_ptr, out_ptr, R, inner, n_iblk,
                    BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    pid = tl.program_id(0)
    o = pid // n_iblk
    ib = pid % n_iblk
    offs_i = ib * BLOCK_I + tl.arange(0, BLOCK_I)
    mask_i = offs_i < inner
    base = o.to(tl.int64) * R * inner
    acc = tl.full([BLOCK_R, BLOCK_I], 0.0, tl.float32)
    for r0 in range(0, R, BLOCK_R):
        offs_r = r0 + tl.arange(0, BLOCK_R)
        mask = (offs_r < R)[:, None] & mask_i[None, :]
        offs = base + offs_r.to(tl.int64)[:, None] * inner + offs_i[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        acc = acc + x
    res = tl.sum(acc, axis=0) / R
    tl.store(out_ptr + o.to(tl.int64) * inner + offs_i, res.to(out_ptr.dtype.element_ty),
             mask=mask_i)


@triton.jit
def mean_rows_kernel(x_ptr, out_ptr, R, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row.to(tl.int64) * R
    acc = tl.full([BLOCK], 0.0, tl.float32)
    for r0 in range(0, R, BLOCK):
        offs_r = r0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs_r, mask=offs_r < R, other=0.0).to(tl.float32)
        acc = acc + x
    res = tl.sum(acc, axis=0) / R
    tl.store(out_ptr + row, res.to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()
        shape = tuple(x.shape)
        R = shape[d]
        outer = math.prod(shape[:d])
        inner = math.prod(shape[d + 1:])
        out = torch.empty(shape[:d] + shape[d + 1:], device=x.device, dtype=x.dtype)
        if inner == 1:
            BLOCK = min(4096, max(256, triton.next_power_of_2(R)))
            mean_rows_kernel[(outer,)](x, out, R, BLOCK=BLOCK, num_warps=8)
        else:
            BLOCK_I = min(32, max(16, triton.next_power_of_2(inner)))
            BLOCK_R = min(256, max(16, triton.next_power_of_2(R)))
            n_iblk = triton.cdiv(inner, BLOCK_I)
            mean_dim_kernel[(outer * n_iblk,)](x, out, R, inner, n_iblk,
                                               BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I, num_warps=8)
        return out
