# Linear -> divide -> GELU (erf form).
# One tiled GEMM (x @ W^T, W read in place as [N, K]) with the whole epilogue
# fused before the single store, so the [M, N] result is written once.
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu(x):
    # Exact (erf) GELU, F.gelu's default.
    return 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))


@triton.jit
def linear_div_gelu_kernel(
    a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, divisor,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, PRECISION: tl.constexpr,
):
    # a = x [M, K]; b = weight [N, K] read as its transpose, b[k, n] = weight[n, k].
    # Grouped ordering: GROUP_M row blocks in a row walk the column blocks
    # together, so the B tiles they share are still in L2.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    rm = pid_m * BLOCK_M + offs_m
    rn = pid_n * BLOCK_N + offs_n
    mask_m = rm < M
    mask_n = rn < N
    # The block's corner is a 64-bit offset (operands and outputs can pass
    # 2**31 elements); offsets inside the tile stay 32-bit.
    a_ptrs = (a_ptr + (pid_m * BLOCK_M).to(tl.int64) * stride_am
              + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = (b_ptr + (pid_n * BLOCK_N).to(tl.int64) * stride_bn
              + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=mask_m[:, None] & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & mask_n[None, :], other=0.0)
        # fp32 operands: "tf32x3" (three TF32 tensor-core products, about fp32
        # accuracy; plain TF32 would miss the 1e-4 tolerance). 16-bit operands:
        # the precision flag is ignored and the product accumulates in fp32.
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # Fused epilogue, in fp32 on the accumulator, before the one store.
    bias = tl.load(bias_ptr + rn, mask=mask_n, other=0.0).to(tl.float32)
    t = acc + bias[None, :]
    y = _gelu(t / divisor)
    c_ptrs = (c_ptr + (pid_m * BLOCK_M).to(tl.int64) * stride_cm
              + (pid_n * BLOCK_N).to(tl.int64) * stride_cn
              + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn)
    tl.store(c_ptrs, y.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


# fp32 operands use "tf32x3" (about fp32 accuracy at tensor-core speed).
_FP32_DOT = "tf32x3"


def _gemm_config(M, N, dtype, device):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, input_precision)."""
    if dtype == torch.float32:
        if M <= 64:
            return 64, 64, 32, 4, 4, _FP32_DOT
        return 128, 64, 32, 4, 4, _FP32_DOT
    if M <= 64:
        return 64, 128, 64, 4, 4, "tf32"
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    if triton.cdiv(M, 128) * triton.cdiv(N, 256) >= sms:
        return 128, 256, 64, 8, 3, "tf32"
    return 128, 128, 64, 4, 4, "tf32"


class _LinearParams(nn.Module):
    """nn.Linear's parameters and its seeded initialisation, draw for draw,
    without its forward (the matmul runs in the Triton kernel above)."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features))
        else:
            self.register_parameter("bias", None)
        # As nn.Linear.reset_parameters: weight, then bias, from the same RNG.
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if bias:
            bound = 1 / math.sqrt(in_features) if in_features > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = _LinearParams(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        weight = self.linear.weight
        bias = self.linear.bias
        a = x.reshape(-1, x.shape[-1])
        M, K = a.shape
        N = weight.shape[0]
        out = torch.empty((M, N), device=x.device, dtype=x.dtype)
        bm, bn, bk, warps, stages, prec = _gemm_config(M, N, x.dtype, x.device)
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        linear_div_gelu_kernel[grid](
            a, weight, bias, out, M, N, K,
            a.stride(0), a.stride(1), weight.stride(1), weight.stride(0),
            out.stride(0), out.stride(1), float(self.divisor),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, PRECISION=prec,
            num_warps=warps, num_stages=stages,
        )
        return out.reshape(*x.shape[:-1], N)
