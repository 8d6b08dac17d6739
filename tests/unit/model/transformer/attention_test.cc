// Attention against a per-head, per-query reference written out with plain
// loops: grouped-query heads must read kv head h / (H / KVH), as
// transformers' repeat_kv does, under causal, offset-causal and ragged masks.
#include "model/transformer/attention.h"

#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

// out[b, h, t] = sum_s softmax_s(q[b,h,t] . k[b,g,s] / sqrt(D)) v[b,g,s] over
// the keys allowed(b, t, s) says, g = h / (H / KVH).
template <typename Allowed>
at::Tensor ReferenceAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              Allowed allowed) {
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2);
  const int64_t group = heads / k.size(1), keys = k.size(2);
  at::Tensor out = at::zeros_like(q);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < queries; ++t) {
        std::vector<double> scores;
        std::vector<int64_t> used;
        for (int64_t s = 0; s < keys; ++s) {
          if (!allowed(b, t, s)) continue;
          const double dot = (q[b][h][t] * k[b][h / group][s]).sum().item<double>();
          scores.push_back(dot / std::sqrt(static_cast<double>(q.size(3))));
          used.push_back(s);
        }
        double max_score = -1e300, total = 0;
        for (double score : scores) max_score = std::max(max_score, score);
        for (double& score : scores) total += (score = std::exp(score - max_score));
        for (size_t i = 0; i < used.size(); ++i) {
          out[b][h][t] += (scores[i] / total) * v[b][h / group][used[i]];
        }
      }
    }
  }
  return out;
}

struct Inputs {
  at::Tensor q, k, v;
};

Inputs RandomInputs(int64_t batch, int64_t heads, int64_t kv_heads, int64_t queries, int64_t keys,
                    int64_t dim, uint64_t seed) {
  at::manual_seed(seed);
  return Inputs{at::randn({batch, heads, queries, dim}), at::randn({batch, kv_heads, keys, dim}),
                at::randn({batch, kv_heads, keys, dim})};
}

void ExpectClose(const at::Tensor& actual, const at::Tensor& expected, double tolerance = 1e-5) {
  ASSERT_EQ(actual.sizes(), expected.sizes());
  EXPECT_LE((actual - expected).abs().max().item<double>(), tolerance);
}

TEST(AttentionTest, CausalGroupedQueryHeadsReadTheirSharedKvHead) {
  const Inputs in = RandomInputs(2, 6, 2, 5, 5, 4, 1);
  const at::Tensor expected = ReferenceAttention(
      in.q, in.k, in.v, [](int64_t, int64_t t, int64_t s) { return s <= t; });
  ExpectClose(AttendMath(in.q, in.k, in.v, AttentionMask::Causal()), expected);
  ExpectClose(Attend(in.q, in.k, in.v, AttentionMask::Causal()), expected);
}

TEST(AttentionTest, MultiHeadWithoutGroupingMatchesReference) {
  const Inputs in = RandomInputs(1, 3, 3, 4, 4, 8, 2);
  const at::Tensor expected = ReferenceAttention(
      in.q, in.k, in.v, [](int64_t, int64_t t, int64_t s) { return s <= t; });
  ExpectClose(Attend(in.q, in.k, in.v, AttentionMask::Causal()), expected);
}

TEST(AttentionTest, GroupingIsNotInterleaved) {
  // Guards against reading kv head h % KVH instead of h / (H / KVH): with
  // distinct kv heads the two layouts give different outputs.
  const Inputs in = RandomInputs(1, 4, 2, 3, 3, 4, 3);
  const at::Tensor interleaved_k = in.k.repeat({1, 2, 1, 1});
  const at::Tensor interleaved_v = in.v.repeat({1, 2, 1, 1});
  const at::Tensor grouped = Attend(in.q, in.k, in.v, AttentionMask::Causal());
  const at::Tensor wrong = Attend(in.q, interleaved_k, interleaved_v, AttentionMask::Causal());
  EXPECT_GT((grouped - wrong).abs().max().item<double>(), 1e-3);
}

TEST(AttentionTest, RaggedDecodeMaskIgnoresKeysPastEachRowsPosition) {
  // One query per row, rows at positions 2, 6 and 0 of a 7-key span.
  Inputs in = RandomInputs(3, 4, 2, 1, 7, 8, 4);
  const std::vector<int64_t> positions = {2, 6, 0};
  // Large finite garbage beyond each row's position must not leak in.
  for (size_t row = 0; row < positions.size(); ++row) {
    const int64_t pos = positions[row];
    in.k[static_cast<int64_t>(row)].narrow(1, pos + 1, 6 - pos).fill_(50.0);
    in.v[static_cast<int64_t>(row)].narrow(1, pos + 1, 6 - pos).fill_(1e4);
  }
  const at::Tensor mask = RaggedDecodeMask(at::tensor(positions, at::kLong), 7);
  const at::Tensor expected = ReferenceAttention(
      in.q, in.k, in.v,
      [&](int64_t b, int64_t, int64_t s) { return s <= positions[static_cast<size_t>(b)]; });
  ExpectClose(AttendMath(in.q, in.k, in.v, AttentionMask::Explicit(mask)), expected, 1e-4);
  ExpectClose(Attend(in.q, in.k, in.v, AttentionMask::Explicit(mask)), expected, 1e-4);
}

TEST(AttentionTest, OffsetCausalChunkEqualsTheSameRowsOfFullCausal) {
  // Queries 3..5 of a 6-token sequence over all 6 keys.
  const Inputs in = RandomInputs(1, 4, 2, 6, 6, 8, 5);
  const at::Tensor full = Attend(in.q, in.k, in.v, AttentionMask::Causal());
  const at::Tensor mask = OffsetCausalMask(3, 3, at::kCPU);
  const at::Tensor chunk =
      Attend(in.q.narrow(2, 3, 3), in.k, in.v, AttentionMask::Explicit(mask));
  ExpectClose(chunk, full.narrow(2, 3, 3));
}

TEST(AttentionTest, MasksHaveTheDocumentedShapeAndPattern) {
  const at::Tensor offset = OffsetCausalMask(2, 2, at::kCPU);
  ASSERT_EQ(offset.sizes(), (std::vector<int64_t>{1, 1, 2, 4}));
  // Compared as 0/1 integers: LibTorch 1.13 cannot build a bool tensor from a list.
  EXPECT_TRUE(offset.flatten().to(at::kLong).equal(at::tensor({1, 1, 1, 0, 1, 1, 1, 1}, at::kLong)));
  const at::Tensor ragged = RaggedDecodeMask(at::tensor({1, 0}, at::kLong), 3);
  ASSERT_EQ(ragged.sizes(), (std::vector<int64_t>{2, 1, 1, 3}));
  EXPECT_TRUE(ragged.flatten().to(at::kLong).equal(at::tensor({1, 1, 0, 1, 0, 0}, at::kLong)));
}

TEST(AttentionTest, FusedKernelMatchesMath) {
  if (!HaveFusedAttention()) {
    GTEST_SKIP() << "LibTorch < 2.0 has no scaled_dot_product_attention; Attend is AttendMath";
  }
  const Inputs in = RandomInputs(2, 8, 2, 9, 9, 16, 6);
  ExpectClose(Attend(in.q, in.k, in.v, AttentionMask::Causal()),
              AttendMath(in.q, in.k, in.v, AttentionMask::Causal()));
  const at::Tensor mask = RaggedDecodeMask(at::tensor({4, 8}, at::kLong), 9);
  const at::Tensor q = in.q.narrow(2, 0, 1);
  ExpectClose(Attend(q, in.k, in.v, AttentionMask::Explicit(mask)),
              AttendMath(q, in.k, in.v, AttentionMask::Explicit(mask)));
}

}  // namespace
}  // namespace kforge
