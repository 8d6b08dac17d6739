# Tanh: one flat pass over the contiguous tensor, BLOCK elements per
# program (bandwidth bound: one read and one write per element). 1024
# elements over 8 warps is 4 per thread: one 16-byte access for fp32, and the
# speed holds when the length is odd and the masked accesses cannot vectorize.
# tanh is built from exp(-2|u|), which cannot overflow, so large |x| gives +-1.
# Math is done in fp32 and stored in the input dtype; offsets are int64
# because the full-size tensor can pass 2**31 elements.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tanh_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    y = tl.where(x < 0, -y, y)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        tanh_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=8)
        return out
