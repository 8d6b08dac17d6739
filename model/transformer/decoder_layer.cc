#include "model/transformer/decoder_layer.h"

#include <utility>

#include <c10/core/GradMode.h>
#include <torch/version.h>

#include "model/kernels/fused_kernels.h"

namespace kforge {
namespace {

// The parts as one tensor ([sum of rows, cols], or [sum] for vectors) when
// each follows the one before it in memory (FollowsInMemory), as
// LoadDecoderWeights packs q/k/v and gate/up and FlatParameters keeps them;
// undefined otherwise (a part re-homed on its own), and the caller runs one
// GEMM per part. A view: it reads the live parameters, so weight updates
// (copies into them) show.
at::Tensor StackedRows(std::initializer_list<const at::Tensor*> parts) {
  const at::Tensor& first = **parts.begin();
  if (!first.defined()) return at::Tensor();
  int64_t rows = 0;
  const at::Tensor* previous = nullptr;
  for (const at::Tensor* part : parts) {
    const bool fits = part->defined() && part->is_contiguous() && part->dim() == first.dim() &&
                      part->scalar_type() == first.scalar_type() &&
                      (first.dim() == 1 || part->size(1) == first.size(1)) &&
                      (previous == nullptr || FollowsInMemory(*previous, *part));
    if (!fits) return at::Tensor();
    rows += part->size(0);
    previous = part;
  }
  if (first.dim() == 1) return first.as_strided({rows}, {1});
  return first.as_strided({rows, first.size(1)}, {first.size(1), 1});
}

struct Projections {
  at::Tensor q, k, v;  // [B, T, heads * D] each
};

// q, k and v of x. Without autograd and with the weights stacked, one GEMM
// (and one bias add inside it) instead of three: at decode batch sizes the
// k and v GEMMs are latency-bound, not bandwidth-bound. With autograd the
// three stay separate, so each parameter gets its own gradient.
Projections Project(const AttentionWeights& w, const at::Tensor& x) {
  if (!at::GradMode::is_enabled()) {
    const at::Tensor weight = StackedRows({&w.q_proj, &w.k_proj, &w.v_proj});
    const at::Tensor bias =
        w.q_bias.defined() ? StackedRows({&w.q_bias, &w.k_bias, &w.v_bias}) : at::Tensor();
    if (weight.defined() && bias.defined() == w.q_bias.defined()) {
      const at::Tensor qkv = at::linear(x, weight, bias);
      const int64_t q_out = w.q_proj.size(0), kv_out = w.k_proj.size(0);
      return {qkv.narrow(-1, 0, q_out), qkv.narrow(-1, q_out, kv_out),
              qkv.narrow(-1, q_out + kv_out, kv_out)};
    }
  }
  return {at::linear(x, w.q_proj, w.q_bias), at::linear(x, w.k_proj, w.k_bias),
          at::linear(x, w.v_proj, w.v_bias)};
}

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
  const Projections p = Project(w, x);
  at::Tensor q = SplitHeads(p.q, c.num_attention_heads, c.head_dim, w.q_norm, eps);
  at::Tensor k = SplitHeads(p.k, c.num_key_value_heads, c.head_dim, w.k_norm, eps);
  const at::Tensor v = SplitHeads(p.v, c.num_key_value_heads, c.head_dim, at::Tensor(), eps);
  if (!rope.deferred) {
    q = ApplyRope(q, rope);
    k = ApplyRope(k, rope);
  }
  const at::Tensor out = attend(layer, q, k, v);
  // [B, H, T, D] -> [B, T, H * D], before o_proj
  return out.transpose(1, 2).reshape({x.size(0), x.size(1), -1});
}

at::Tensor SiluMul(const at::Tensor& gate, const at::Tensor& up) {
  if (UseFusedKernels(gate) && !up.requires_grad()) return FusedSiluMul(gate, up);
  return at::silu(gate) * up;
}

// SwiGLU before down_proj: without autograd and with gate/up stacked, one
// GEMM over both and (on CUDA) one kernel for silu(gate) * up.
at::Tensor SwiGluGate(const LayerWeights& w, const at::Tensor& x) {
  if (!at::GradMode::is_enabled()) {
    if (const at::Tensor both = StackedRows({&w.gate_proj, &w.up_proj}); both.defined()) {
      const at::Tensor gate_up = at::linear(x, both);
      const int64_t width = w.gate_proj.size(0);
      return SiluMul(gate_up.narrow(-1, 0, width), gate_up.narrow(-1, width, width));
    }
  }
  return SiluMul(at::linear(x, w.gate_proj), at::linear(x, w.up_proj));
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
  // kforge's kernel (sampling, on CUDA): one kernel, transformers' roundings.
  if (FusedRmsNormSupports(x, weight)) return FusedRmsNorm(x, weight, eps);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  // Two kernels instead of eight on CUDA (training, and sampling without
  // kforge's kernels): the normalisation in float32 rounded to x's dtype,
  // then the weight, rounded again, as transformers and FusedRmsNorm round.
  // at::rms_norm with the weight inside rounds once, and a policy trained
  // that way would differ from its own frozen reference and from its
  // sampler by a rounding at every norm.
  if (x.is_cuda()) return weight * at::rms_norm(x, {x.size(-1)}, c10::nullopt, eps);
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
