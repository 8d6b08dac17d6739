// Scaled dot-product attention with grouped-query heads (several query heads
// share one key/value head, like transformers' repeat_kv) and either a causal
// or an explicit boolean mask.
//
//   at::Tensor out = Attend(q, k, v, AttentionMask::Causal());
//   at::Tensor out = Attend(q, k, v, AttentionMask::Explicit(allowed));
//
// With LibTorch >= 2.0 Attend runs at::scaled_dot_product_attention (fused
// kernels on CUDA); LibTorch 1.13 has no public one, so Attend falls back to
// AttendMath, the matmul-softmax that transformers' eager path computes
// (softmax in float32). Both are exposed so tests can compare them.
#ifndef KFORGE_MODEL_TRANSFORMER_ATTENTION_H_
#define KFORGE_MODEL_TRANSFORMER_ATTENTION_H_

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

namespace kforge {

struct AttentionMask {
  // Query i attends keys 0..i; needs T == S.
  static AttentionMask Causal() { return AttentionMask{true, at::Tensor()}; }
  // Broadcastable to [B, H, T, S]: bool (true = may attend), or of q's
  // dtype and added to the scores (0 or -inf; see AdditiveMask). Every query
  // row must allow at least one key.
  static AttentionMask Explicit(at::Tensor allowed) {
    return AttentionMask{false, std::move(allowed)};
  }
  bool causal = false;
  at::Tensor allowed;
};

// q [B, H, T, D]; k, v [B, KVH, S, D] with H a multiple of KVH. Returns
// [B, H, T, D] in q's dtype. Scale 1/sqrt(D).
at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const AttentionMask& mask);
at::Tensor AttendMath(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const AttentionMask& mask);

// Whether Attend uses at::scaled_dot_product_attention in this build.
bool HaveFusedAttention();

// Masks for the cached paths, bool on `device`.
// A chunk of T queries at positions start..start+T-1 over keys 0..start+T-1:
// [1, 1, T, start + T].
at::Tensor OffsetCausalMask(int64_t start, int64_t count, const at::Device& device);
// One query per row at positions[i] over keys 0..span-1, key j allowed when
// j <= positions[i]: [N, 1, 1, span].
at::Tensor RaggedDecodeMask(const at::Tensor& positions, int64_t span);
// A bool mask as the additive one fused attention takes (0 where allowed,
// -inf elsewhere) in `dtype`. Built once per decode step: given a bool mask,
// scaled_dot_product_attention converts it on every call, in every layer.
at::Tensor AdditiveMask(const at::Tensor& allowed, at::ScalarType dtype);

}  // namespace kforge

#endif  // KFORGE_MODEL_TRANSFORMER_ATTENTION_H_
