// Rotary position embedding as Hugging Face computes it for Llama, Qwen2 and
// Qwen3: inverse frequencies base^(-2i/d) in float32 (with Llama 3's
// frequency-dependent scaling when configured), cos/sin of position * freq
// in float32 cast to the activation dtype, and the "rotate half" layout
// (the first and second halves of a head are the pair, not even/odd lanes).
//
//   at::Tensor inv_freq = RopeInverseFrequencies(config);      // [head_dim / 2]
//   RopeTables rope = MakeRopeTables(inv_freq, positions, at::kBFloat16);
//   at::Tensor q_rotated = ApplyRope(q, rope);                 // q [B, H, T, D]
#ifndef KFORGE_MODEL_TRANSFORMER_ROPE_H_
#define KFORGE_MODEL_TRANSFORMER_ROPE_H_

#include <ATen/ATen.h>

#include "model/checkpoint/model_config.h"

namespace kforge {

// float32 [head_dim / 2] on the CPU. rope_scaling type "llama3" follows
// transformers' _compute_llama3_parameters; no scaling otherwise. Expects a
// config checked by CheckDecoderConfig.
at::Tensor RopeInverseFrequencies(const ModelConfig& config);

// cos and sin, [B, 1, T, head_dim], broadcast over heads.
struct RopeTables {
  at::Tensor cos;
  // sin with its first half negated: rotate_half(x) * sin is then
  // roll(x, D/2) * sin_signed, and RoPE takes three kernels instead of five
  // (a decode step runs it twice per layer).
  at::Tensor sin_signed;
  // No tables: the attend function rotates q and k itself (a decode step
  // on CUDA with kforge's kernels, model/kernels/fused_kernels.h).
  bool deferred = false;
};

// positions: int64 [B, T] on the device of inv_freq (move inv_freq first).
RopeTables MakeRopeTables(const at::Tensor& inv_freq, const at::Tensor& positions,
                          at::ScalarType dtype);

// x [B, heads, T, head_dim] -> x * cos + rotate_half(x) * sin.
at::Tensor ApplyRope(const at::Tensor& x, const RopeTables& rope);

}  // namespace kforge

#endif  // KFORGE_MODEL_TRANSFORMER_ROPE_H_
