#include "model/transformer/attention.h"

#include <cmath>
#include <limits>

#include <torch/version.h>

namespace kforge {
namespace {

// [B, KVH, S, D] -> [B, KVH * n_rep, S, D], head h reading kv head h / n_rep,
// as transformers' repeat_kv.
at::Tensor RepeatKv(const at::Tensor& x, int64_t n_rep) {
  if (n_rep == 1) return x;
  const int64_t b = x.size(0), kvh = x.size(1), s = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, kvh, n_rep, s, d}).reshape({b, kvh * n_rep, s, d});
}

at::Tensor AttendUngrouped(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const AttentionMask& mask, bool fused);

// One query per row: fold the query heads that share a kv head into the
// query-length axis ([B, H, 1, D] -> [B, KVH, n_rep, D]) so the keys are read
// once per kv head instead of being copied n_rep times. Valid because no
// causal structure relates those folded rows; the mask broadcasts over them.
at::Tensor AttendSingleQueryGrouped(const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v, const AttentionMask& mask,
                                    bool fused) {
  const int64_t b = q.size(0), h = q.size(1), d = q.size(3), kvh = k.size(1);
  const at::Tensor folded = q.reshape({b, kvh, h / kvh, d});
  // Per-head masks do not fold; only [B or 1, 1, 1, S] ones reach here.
  const at::Tensor out = AttendUngrouped(folded, k, v, mask, fused);
  return out.reshape({b, h, 1, d});
}

bool CanFoldHeads(const at::Tensor& q, const at::Tensor& k, const AttentionMask& mask) {
  if (q.size(2) != 1 || q.size(1) == k.size(1) || mask.causal) return false;
  return !mask.allowed.defined() || mask.allowed.size(1) == 1;
}

at::Tensor AttendUngroupedMath(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const AttentionMask& mask) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
  at::Tensor allowed = mask.allowed;
  if (mask.causal) {
    allowed = at::ones({q.size(2), k.size(2)}, q.options().dtype(at::kBool)).tril();
  }
  if (allowed.defined() && allowed.scalar_type() == at::kBool) {
    scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  } else if (allowed.defined()) {
    scores = scores + allowed;
  }
  const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  return at::matmul(probs, v);
}

at::Tensor AttendUngrouped(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const AttentionMask& mask, bool fused) {
#if TORCH_VERSION_MAJOR >= 2
  if (fused) {
    // An absent mask must be nullopt: SDPA reads the dtype of any tensor given.
    c10::optional<at::Tensor> allowed;
    if (!mask.causal && mask.allowed.defined()) allowed = mask.allowed;
    return at::scaled_dot_product_attention(q, k, v, allowed, /*dropout_p=*/0.0, mask.causal);
  }
#endif
  return AttendUngroupedMath(q, k, v, mask);
}

at::Tensor AttendImpl(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const AttentionMask& mask, bool fused) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "attention expects 4-d q, k, v");
  TORCH_CHECK(q.size(1) % k.size(1) == 0, "query heads ", q.size(1),
              " not a multiple of kv heads ", k.size(1));
  TORCH_CHECK(!mask.causal || q.size(2) == k.size(2), "causal attention needs T == S, got ",
              q.size(2), " and ", k.size(2));
  if (CanFoldHeads(q, k, mask)) return AttendSingleQueryGrouped(q, k, v, mask, fused);
  const int64_t n_rep = q.size(1) / k.size(1);
  return AttendUngrouped(q, RepeatKv(k, n_rep), RepeatKv(v, n_rep), mask, fused);
}

}  // namespace

bool HaveFusedAttention() { return TORCH_VERSION_MAJOR >= 2; }

at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const AttentionMask& mask) {
  return AttendImpl(q, k, v, mask, /*fused=*/HaveFusedAttention());
}

at::Tensor AttendMath(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const AttentionMask& mask) {
  return AttendImpl(q, k, v, mask, /*fused=*/false);
}

at::Tensor OffsetCausalMask(int64_t start, int64_t count, const at::Device& device) {
  const at::TensorOptions options = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor query_pos = at::arange(start, start + count, options).unsqueeze(1);
  const at::Tensor key_pos = at::arange(start + count, options).unsqueeze(0);
  return key_pos.le(query_pos).view({1, 1, count, start + count});
}

at::Tensor RaggedDecodeMask(const at::Tensor& positions, int64_t span) {
  const at::Tensor key_pos = at::arange(span, positions.options().dtype(at::kLong));
  return key_pos.unsqueeze(0).le(positions.unsqueeze(1)).view({positions.size(0), 1, 1, span});
}

at::Tensor AdditiveMask(const at::Tensor& allowed, at::ScalarType dtype) {
  return at::zeros(allowed.sizes(), allowed.options().dtype(dtype))
      .masked_fill_(allowed.logical_not(), -std::numeric_limits<double>::infinity());
}

}  // namespace kforge
