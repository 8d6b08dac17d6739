import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, out_ptr, cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * stride + offsets, mask=mask, other=0.0)
    mean_sq = tl.sum(x * x, axis=0) / cols
    tl.store(out_ptr + row * stride + offsets, x * tl.rsqrt(mean_sq + eps), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty_like(x)
        rms_norm_kernel[(rows,)](x, out, cols, x.stride(0), self.eps,
                                 BLOCK=triton.next_power_of_2(cols))
        return out
