# RMSNorm over dim 1 of (batch, features, *): x / sqrt(mean(x^2 over features) + eps).
# Viewed as (outer, F, inner) with the reduced F strided by inner, each program
# owns one batch entry and BLOCK_I contiguous inner positions: a
# [BLOCK_F, BLOCK_I] tile whose rows are coalesced runs of memory. When all F
# features fit one tile (F <= 128, the task's 64) the tile is loaded once,
# reduced over axis 0 and written: one read, one write. Wider F loops over
# feature chunks twice (sum of squares, then scale).
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, out_ptr, F, inner, n_iblk, eps,
                   BLOCK_F: tl.constexpr, BLOCK_I: tl.constexpr, SINGLE: tl.constexpr):
    pid = tl.program_id(0)
    o = pid // n_iblk
    ib = pid % n_iblk
    offs_i = ib * BLOCK_I + tl.arange(0, BLOCK_I)
    mask_i = offs_i < inner
    base = o.to(tl.int64) * F * inner
    if SINGLE:
        offs_f = tl.arange(0, BLOCK_F)
        mask = (offs_f < F)[:, None] & mask_i[None, :]
        offs = base + offs_f.to(tl.int64)[:, None] * inner + offs_i[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        rms = tl.sqrt(tl.sum(x * x, axis=0) / F + eps)
        tl.store(out_ptr + offs, (x / rms[None, :]).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_F, BLOCK_I], tl.float32)
        for f0 in range(0, F, BLOCK_F):
            offs_f = f0 + tl.arange(0, BLOCK_F)
            mask = (offs_f < F)[:, None] & mask_i[None, :]
            offs = base + offs_f.to(tl.int64)[:, None] * inner + offs_i[None, :]
            x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            acc += x * x
        rms = tl.sqrt(tl.sum(acc, axis=0) / F + eps)
        for f0 in range(0, F, BLOCK_F):
            offs_f = f0 + tl.arange(0, BLOCK_F)
            mask = (offs_f < F)[:, None] & mask_i[None, :]
            offs = base + offs_f.to(tl.int64)[:, None] * inner + offs_i[None, :]
            x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(out_ptr + offs, (x / rms[None, :]).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        F = x.shape[1]
        inner = math.prod(x.shape[2:])
        outer = x.shape[0]
        BLOCK_F = max(2, triton.next_power_of_2(F))
        single = BLOCK_F <= 128
        if not single:
            BLOCK_F = 32
        BLOCK_I = min(max(16, triton.next_power_of_2(inner)), max(32, 8192 // BLOCK_F))
        n_iblk = triton.cdiv(inner, BLOCK_I)
        out = torch.empty_like(x)
        rmsnorm_kernel[(outer * n_iblk,)](x, out, F, inner, n_iblk, self.eps,
                                          BLOCK_F=BLOCK_F, BLOCK_I=BLOCK_I,
                                          SINGLE=single, num_warps=8)
        return out
