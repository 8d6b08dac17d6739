# LayerNorm over the trailing normalized_shape (64*256*256 = 4M elements per row,
# only 16 rows, or 1): far too few rows for a program per row, so each row is
# split into BLOCK-wide chunks and two launches share the work:
#   stats: one program per (row, chunk) writes the chunk's mean and M2 (sum of
#          squared deviations from the chunk mean; the chunk sits in registers,
#          so this is exact two-pass, not E[x^2] - E[x]^2);
#   apply: one program per (chunk, row) merges its row's chunk stats (Chan's
#          formula; biased variance as PyTorch) and writes
#          (x - mean) * rstd * w + b. Chunk-major order makes the rows running
#          at the same time share a chunk of weight and bias in L2.
# Two launches rather than three (no separate per-row finalize): launches
# cost host time, which the timing sees once it outlasts the L2 flush.
# The parameters are those nn.LayerNorm makes (weight ones, bias zeros, under
# the same names ln.weight / ln.bias, eps 1e-5), held by a plain module since
# an nn.LayerNorm would count as PyTorch doing the work.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def ln_stats_kernel(x_ptr, mean_ptr, m2_ptr, N, nchunks, BLOCK: tl.constexpr):
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
def ln_apply_kernel(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, m2_ptr, N, rows, nchunks, eps,
                    BLOCK: tl.constexpr, CBLOCK: tl.constexpr):
    pid = tl.program_id(0)
    c = pid // rows
    row = pid % rows
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
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd * w + b
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


class LayerNormParams(nn.Module):
    def __init__(self, normalized_shape, eps: float = 1e-5):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = LayerNormParams(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.ln.weight.contiguous()
        b = self.ln.bias.contiguous()
        N = w.numel()
        rows = x.numel() // N
        BLOCK = min(4096, max(256, triton.next_power_of_2(N)))
        nchunks = triton.cdiv(N, BLOCK)
        CBLOCK = min(1024, max(16, triton.next_power_of_2(nchunks)))
        cmean = torch.empty(rows * nchunks, device=x.device, dtype=torch.float32)
        cm2 = torch.empty(rows * nchunks, device=x.device, dtype=torch.float32)
        out = torch.empty_like(x)
        grid = (rows * nchunks,)
        ln_stats_kernel[grid](x, cmean, cm2, N, nchunks, BLOCK=BLOCK, num_warps=8)
        ln_apply_kernel[grid](x, w, b, out, cmean, cm2, N, rows, nchunks, self.ln.eps,
                              BLOCK=BLOCK, CBLOCK=CBLOCK, num_warps=8)
        return out
