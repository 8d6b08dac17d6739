# torch.mean(clamp(1 - predictions * targets, min=0)), a mean over every
# element.
# targets (B,) broadcast against predictions (B, N) along the last dim, so
# B == N (the task's shapes) or B == 1 (a batch of one): the target of flat
# element (row, col) is targets[col * t_stride] with t_stride 1 or 0.
# Two launches, deterministic and atomic-free:
#   pass 1: P persistent programs (P <= 1024, a few per SM) stride over
#   (row, BLOCK-wide column block) tiles, accumulate the per-element loss in
#   fp32 lanes and each write one partial sum;
#   pass 2: one program adds the P partials, divides by the element count and
#   stores the 0-d result in the input dtype.
# Row offsets are int64: the full-size inputs hold 2**30 elements.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def hinge_partial_kernel(p_ptr, t_ptr, part_ptr, ncols, t_stride, ncb, ntiles, iters,
                         BLOCK: tl.constexpr):
    # Tiles are (row, column block) pairs, so the broadcast target index is a
    # plain column index: no per-element integer division.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for it in range(0, iters):
        tile = pid + it * nprog
        row = tile // ncb
        cols = (tile % ncb) * BLOCK + tl.arange(0, BLOCK)
        mask = (cols < ncols) & (tile < ntiles)
        p = tl.load(p_ptr + row.to(tl.int64) * ncols + cols, mask=mask, other=0.0).to(tl.float32)
        t = tl.load(t_ptr + cols * t_stride, mask=mask, other=0.0).to(tl.float32)
        loss = tl.maximum(1.0 - p * t, 0.0)
        acc += tl.where(mask, loss, 0.0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def hinge_final_kernel(part_ptr, out_ptr, nparts, n, PBLOCK: tl.constexpr):
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
        ncols = predictions.shape[-1]
        t_stride = 1 if targets.numel() == ncols else 0
        BLOCK = min(4096, max(256, triton.next_power_of_2(ncols)))
        ncb = triton.cdiv(ncols, BLOCK)
        ntiles = (n // ncols) * ncb
        P = min(ntiles, 1024)
        iters = triton.cdiv(ntiles, P)
        part = torch.empty(P, device=predictions.device, dtype=torch.float32)
        out = torch.empty((), device=predictions.device, dtype=predictions.dtype)
        hinge_partial_kernel[(P,)](predictions, targets, part, ncols, t_stride, ncb, ntiles,
                                   iters, BLOCK=BLOCK, num_warps=8)
        hinge_final_kernel[(1,)](part, out, P, n, PBLOCK=max(16, triton.next_power_of_2(P)),
                                 num_warps=4)
        return out
