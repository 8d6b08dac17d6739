# ReLU: one flat pass over the contiguous tensor, BLOCK elements per
# program (bandwidth bound: one read and one write per element). 1024
# elements over 8 warps is 4 per thread: one 16-byte access for fp32, and the
# speed holds when the length is odd and the masked accesses cannot vectorize.
# Math is done in fp32 and stored in the input dtype; offsets are int64
# because the full-size tensor can pass 2**31 elements.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.where(x > 0, x, 0.0)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=8)
        return out
