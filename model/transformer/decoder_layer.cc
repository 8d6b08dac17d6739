#include "model/transformer/decoder_layer.h"

#include <utility>

#include <c10/core/GradMode.h>
#include <torch/version.h>

namespace kforge {
namespace {

// [B, T, heads * D] -> [B, T, heads, D], optionally RMS-normalised per head
// (Qwen3 normalises q and k over head_dim before RoPE), -> [B, heads, T, D].
at::Tensor SplitHeads(const at::Tensor& x, int64_t heads, int64_t head_dim,
                      const at::Tensor& norm, double eps) {
  at::Tensor split = x.view({x.size(0), x.size(1), heads, head_dim});
  if (norm.defined()) split = RmsNorm(split, norm, eps);
  return split.transpose(1, 2);
}

at::Tensor SelfAttention(const ModelConfig& c, const AttentionWeights& w, int64_t layer,
                         const at::Tensor& x, const RopeTables& rope, const AttendFn& attend) {
  const double eps = c.rms_norm_eps;
  const at::Tensor q = SplitHeads(at::linear(x, w.q_proj, w.q_bias), c.num_attention_heads,
                                  c.head_dim, w.q_norm, eps);
  const at::Tensor k = SplitHeads(at::linear(x, w.k_proj, w.k_bias), c.num_key_value_heads,
                                  c.head_dim, w.k_norm, eps);
  const at::Tensor v = SplitHeads(at::linear(x, w.v_proj, w.v_bias), c.num_key_value_heads,
                                  c.head_dim, at::Tensor(), eps);
  const at::Tensor out = attend(layer, ApplyRope(q, rope), ApplyRope(k, rope), v);
  // [B, H, T, D] -> [B, T, H * D], before o_proj
  return out.transpose(1, 2).reshape({x.size(0), x.size(1), -1});
}

// SwiGLU before down_proj.
at::Tensor SwiGluGate(const LayerWeights& w, const at::Tensor& x) {
  return at::silu(at::linear(x, w.gate_proj)) * at::linear(x, w.up_proj);
}

// residual + linear(x, weight, bias). Without autograd (sampling) and
// without a bias, one GEMM accumulating into the residual's own storage
// (beta = 1) instead of a GEMM and an add: two kernels fewer per layer,
// which a decode step pays in launch time. The residual is consumed.
at::Tensor AddLinear(at::Tensor residual, const at::Tensor& x, const at::Tensor& weight,
                     const at::Tensor& bias) {
  if (at::GradMode::is_enabled() || bias.defined() || !residual.is_contiguous()) {
    return residual + at::linear(x, weight, bias);
  }
  residual.view({-1, residual.size(-1)}).addmm_(x.reshape({-1, x.size(-1)}), weight.t());
  return residual;
}

}  // namespace

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  // One kernel instead of eight on CUDA (float32 accumulation, one rounding
  // to x's dtype): a decode step runs two or four of these per layer, and
  // each kernel costs microseconds of launch whatever its size.
  if (x.is_cuda()) return at::rms_norm(x, {x.size(-1)}, weight, eps);
#endif
  const at::Tensor h = x.to(at::kFloat);
  const at::Tensor normed = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

at::Tensor DecoderLayerForward(const ModelConfig& config, const LayerWeights& weights,
                               int64_t layer, at::Tensor hidden, const RopeTables& rope,
                               const AttendFn& attend) {
  const double eps = config.rms_norm_eps;
  const at::Tensor attention = SelfAttention(config, weights.attention, layer,
                                             RmsNorm(hidden, weights.input_layernorm, eps), rope,
                                             attend);
  at::Tensor attended = AddLinear(std::move(hidden), attention, weights.attention.o_proj,
                                  weights.attention.o_bias);
  const at::Tensor gated =
      SwiGluGate(weights, RmsNorm(attended, weights.post_attention_layernorm, eps));
  return AddLinear(std::move(attended), gated, weights.down_proj, at::Tensor());
}

}  // namespace kforge
