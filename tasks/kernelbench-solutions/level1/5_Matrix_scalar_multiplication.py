# C = A * s: one flat pass over the contiguous matrix, BLOCK elements per
# program (bandwidth bound: one read and one write per element). 1024 elements
# over 8 warps is 4 per thread: one 16-byte access for fp32, and the speed
# holds when the length is odd and masked accesses cannot vectorize. s is a
# Python number in the task; a 0-d tensor s is read from memory by the kernel
# instead (S_PTR), so no host sync and no PyTorch op either way. Math in fp32,
# stored in A's dtype; int64 offsets since the full-size matrix passes 2**31
# elements.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, s, S_PTR: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if S_PTR:
        sv = tl.load(s).to(tl.float32)
    else:
        sv = s
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x * sv).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        x = A.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        s_ptr = isinstance(s, torch.Tensor)
        scale_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, s if s_ptr else float(s),
                                               S_PTR=s_ptr, BLOCK=BLOCK, num_warps=8)
        return out
