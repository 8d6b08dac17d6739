import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_epilogue_kernel(a_ptr, w_ptr, bias_ptr, out_ptr, M, N, K, multiplier, slope,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         IEEE: tl.constexpr):
    # out = leaky_relu((a @ w.T + bias) * multiplier), exact fp32 products.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + (k + rk)[:, None],
                    mask=(rn[None, :] < N) & ((k + rk)[:, None] < K), other=0.0)
        if IEEE:  # fp32 inputs: full-precision products, not TF32
            acc += tl.dot(a, w, input_precision="ieee")
        else:
            acc += tl.dot(a, w)
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)
    y = (acc + bias[None, :]) * multiplier
    y = tl.where(y > 0, y, y * slope)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], y.to(out_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        # nn.Linear's parameters, initialised exactly as nn.Linear does.
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        bound = 1 / math.sqrt(in_features)
        nn.init.uniform_(self.bias, -bound, bound)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.weight.shape[0]
        out = torch.empty(M, N, device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        gemm_epilogue_kernel[grid](x, self.weight, self.bias, out, M, N, K, self.multiplier,
                                   self.negative_slope, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
                                   IEEE=x.dtype == torch.float32)
        return out
