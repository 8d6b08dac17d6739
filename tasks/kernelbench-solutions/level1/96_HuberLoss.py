# F.smooth_l1_loss(predictions, targets) (beta 1), a mean over every element:
# 0.5 * d^2 where |d| < 1, else |d| - 0.5.
# Two launches, deterministic and atomic-free:
#   pass 1: P persistent programs (P <= 1024, a few per SM) stride over
#   BLOCK-wide blocks, accumulate the per-element loss in fp32 lanes and each
#   write one partial sum;
#   pass 2: one program adds the P partials, divides by the element count and
#   stores the 0-d result in the input dtype.
# Offsets are int64: the full-size inputs hold 2**30 elements each.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def huber_partial_kernel(p_ptr, t_ptr, part_ptr, n, iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for it in range(0, iters):
        offs = (pid + it * nprog).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        p = tl.load(p_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        t = tl.load(t_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        d = tl.abs(p - t)
        loss = tl.where(d < 1.0, 0.5 * d * d, d - 0.5)
        acc += tl.where(mask, loss, 0.0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def huber_final_kernel(part_ptr, out_ptr, nparts, n, PBLOCK: tl.constexpr):
    k = tl.arange(0, PBLOCK)
    parts = tl.load(part_ptr + k, mask=k < nparts, other=0.0)
    tl.store(out_ptr, (tl.sum(parts, axis=0) / n).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        predictions = predictions.contiguous()
        targets = targets.contiguous()
        n = predictions.numel()
        BLOCK = 4096
        nblocks = triton.cdiv(n, BLOCK)
        P = min(nblocks, 1024)
        iters = triton.cdiv(nblocks, P)
        part = torch.empty(P, device=predictions.device, dtype=torch.float32)
        out = torch.empty((), device=predictions.device, dtype=predictions.dtype)
        huber_partial_kernel[(P,)](predictions, targets, part, n, iters, BLOCK=BLOCK,
                                   num_warps=8)
        huber_final_kernel[(1,)](part, out, P, n, PBLOCK=max(16, triton.next_power_of_2(P)),
                                 num_warps=4)
        return out
