# InstanceNorm2d (affine=False, no running stats, so batch statistics even in
# eval): each (n, c) plane of H*W elements (262144 at full size) is normalized
# on its own. Big planes are split into BLOCK-wide chunks so every SM is busy
# for any batch, in two launches:
#   stats: one program per (plane, chunk) writes the chunk's mean and M2 (sum of
#          squared deviations from the chunk mean; the chunk sits in registers,
#          so this is exact two-pass, not E[x^2] - E[x]^2);
#   apply: one program per (plane, chunk) merges its plane's chunk stats
#          (Chan's formula; biased variance as PyTorch) and writes
#          (x - mean) * rstd.
# Planes of up to 16384 elements (the budget-scaled task is 128 x 128) fit in
# one program's registers instead: one kernel, one read and one write.
# nn.InstanceNorm2d's defaults hold no parameters or buffers; only its eps
# (1e-5) is needed.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def in_plane_kernel(x_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    # Whole plane in registers: exact two-pass mean / variance, one read, one write.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    offs = row.to(tl.int64) * N + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
    tl.store(out_ptr + offs, (d * rstd).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def in_stats_kernel(x_ptr, mean_ptr, m2_ptr, N, nchunks, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = pid // nchunks
    c = pid % nchunks
    cols = c * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row.to(tl.int64) * N + cols, mask=mask, other=0.0).to(tl.float32)
    cnt = tl.minimum(N - c * BLOCK, BLOCK).to(tl.float32)
    mean = tl.sum(x, axis=0) / cnt
    d = tl.where(mask, x - mean, 0.0)
    tl.store(mean_ptr + pid, mean)
    tl.store(m2_ptr + pid, tl.sum(d * d, axis=0))


@triton.jit
def in_apply_kernel(x_ptr, out_ptr, mean_ptr, m2_ptr, N, nchunks, eps,
                    BLOCK: tl.constexpr, CBLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = pid // nchunks
    c = pid % nchunks
    # Merge the row's chunk stats (Chan): mean = sum(n_c * mean_c) / N,
    # M2 = sum(M2_c + n_c * (mean_c - mean)^2); they are few and sit in L2.
    stats = row * nchunks
    acc = tl.zeros([CBLOCK], tl.float32)
    for c0 in range(0, nchunks, CBLOCK):
        k = c0 + tl.arange(0, CBLOCK)
        kmask = k < nchunks
        cnt = tl.minimum(N - k * BLOCK, BLOCK).to(tl.float32)
        mc = tl.load(mean_ptr + stats + k, mask=kmask, other=0.0)
        acc += tl.where(kmask, cnt * mc, 0.0)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([CBLOCK], tl.float32)
    for c0 in range(0, nchunks, CBLOCK):
        k = c0 + tl.arange(0, CBLOCK)
        kmask = k < nchunks
        cnt = tl.minimum(N - k * BLOCK, BLOCK).to(tl.float32)
        mc = tl.load(mean_ptr + stats + k, mask=kmask, other=0.0)
        m2 = tl.load(m2_ptr + stats + k, mask=kmask, other=0.0)
        dm = mc - mean
        acc += tl.where(kmask, m2 + cnt * dm * dm, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    cols = c * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    offs = row.to(tl.int64) * N + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, ((x - mean) * rstd).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.num_features = num_features
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        N = x.shape[-1] * x.shape[-2]
        rows = x.numel() // N
        out = torch.empty_like(x)
        if N <= 16384:
            BLOCK = max(256, triton.next_power_of_2(N))
            in_plane_kernel[(rows,)](x, out, N, self.eps, BLOCK=BLOCK,
                                     num_warps=max(4, BLOCK // 1024))
            return out
        BLOCK = 4096
        nchunks = triton.cdiv(N, BLOCK)
        CBLOCK = min(1024, max(16, triton.next_power_of_2(nchunks)))
        cmean = torch.empty(rows * nchunks, device=x.device, dtype=torch.float32)
        cm2 = torch.empty(rows * nchunks, device=x.device, dtype=torch.float32)
        grid = (rows * nchunks,)
        in_stats_kernel[grid](x, cmean, cm2, N, nchunks, BLOCK=BLOCK, num_warps=8)
        in_apply_kernel[grid](x, out, cmean, cm2, N, nchunks, self.eps,
                              BLOCK=BLOCK, CBLOCK=CBLOCK, num_warps=8)
        return out
