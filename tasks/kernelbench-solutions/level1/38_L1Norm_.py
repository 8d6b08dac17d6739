# x / mean(|x|, dim=1). Rows are 65535 wide and a batch can be a single row, so
# each row is split into BLOCK-wide chunks, one program per (row, chunk):
#   pass 1 writes each chunk's sum(|x|) (fp32);
#   pass 2 adds up its row's chunk sums (a handful, from L2), divides by the
#   row length for the mean and writes x / mean for its chunk.
# Two reads and one write per element, all SMs busy at any batch size. Rows
# of up to 16384 elements (the budget-scaled task) instead fit in one
# program's registers: a single kernel, one read and one write. The
# reduced dim is addressed as (outer, R, inner) with stride `inner`; for the
# task's 2-D input inner == 1 and the loads are contiguous.
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l1_row_kernel(x_ptr, out_ptr, R, inner, BLOCK: tl.constexpr):
    # Whole row in registers: one read, one write.
    row = tl.program_id(0)
    base = (row // inner).to(tl.int64) * R * inner + row % inner
    r = tl.arange(0, BLOCK)
    offs = base + r.to(tl.int64) * inner
    mask = r < R
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    d = tl.sum(tl.abs(x), axis=0) / R
    tl.store(out_ptr + offs, (x / d).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def l1_partial_kernel(x_ptr, part_ptr, R, inner, nchunks, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = pid // nchunks
    c = pid % nchunks
    base = (row // inner).to(tl.int64) * R * inner + row % inner
    r = c * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + base + r.to(tl.int64) * inner, mask=r < R, other=0.0).to(tl.float32)
    tl.store(part_ptr + pid, tl.sum(tl.abs(x), axis=0))


@triton.jit
def l1_scale_kernel(x_ptr, out_ptr, part_ptr, R, inner, nchunks,
                    BLOCK: tl.constexpr, CBLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = pid // nchunks
    c = pid % nchunks
    acc = tl.zeros([CBLOCK], tl.float32)
    for c0 in range(0, nchunks, CBLOCK):
        k = c0 + tl.arange(0, CBLOCK)
        acc += tl.load(part_ptr + row * nchunks + k, mask=k < nchunks, other=0.0)
    mean = tl.sum(acc, axis=0) / R

    base = (row // inner).to(tl.int64) * R * inner + row % inner
    r = c * BLOCK + tl.arange(0, BLOCK)
    offs = base + r.to(tl.int64) * inner
    mask = r < R
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (x / mean).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = 1 % x.dim()
        R = x.shape[d]
        inner = math.prod(x.shape[d + 1:])
        rows = x.numel() // R
        out = torch.empty_like(x)
        if R <= 16384:
            BLOCK = max(256, triton.next_power_of_2(R))
            l1_row_kernel[(rows,)](x, out, R, inner, BLOCK=BLOCK, num_warps=max(4, BLOCK // 1024))
            return out
        BLOCK = 4096
        nchunks = triton.cdiv(R, BLOCK)
        CBLOCK = min(1024, max(16, triton.next_power_of_2(nchunks)))
        part = torch.empty(rows * nchunks, device=x.device, dtype=torch.float32)
        grid = (rows * nchunks,)
        l1_partial_kernel[grid](x, part, R, inner, nchunks, BLOCK=BLOCK, num_warps=8)
        l1_scale_kernel[grid](x, out, part, R, inner, nchunks,
                              BLOCK=BLOCK, CBLOCK=CBLOCK, num_warps=8)
        return out
