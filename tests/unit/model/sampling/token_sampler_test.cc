// TokenSampler's contract apart from the law it samples (that is in
// token_sampler_distribution_test.cc): reproducibility per row, greedy
// decoding, top_k = 1, tie-breaking, dtypes and input errors.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/sampling/token_sampler.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

SampledTokens SampleOrDie(const at::Tensor& logits, const std::vector<RowSamplingParams>& params,
                          const std::vector<uint64_t>& steps, bool untruncated = true) {
  absl::StatusOr<SampledTokens> out =
      TokenSampler({.untruncated_logprobs = untruncated}).Sample(logits, params, steps);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : SampledTokens{};
}

at::Tensor RandomLogits(int64_t rows, int64_t vocab, uint64_t seed) {
  at::manual_seed(seed);
  return at::randn({rows, vocab}) * 3;
}

// One row of every kind: plain, tempered, top-k, top-p, both, greedy.
std::vector<RowSamplingParams> MixedParams() {
  return {{1.0, 1.0, 0, 11}, {0.7, 1.0, 0, 12}, {1.0, 1.0, 20, 13}, {1.2, 0.9, 0, 14},
          {0.8, 0.8, 50, 15}, {0.0, 1.0, 0, 16}, {1.0, 0.5, 0, 17}, {2.0, 1.0, 1, 18}};
}

TEST(TokenSamplerTest, ARowsDrawDependsOnlyOnItsOwnLogitsParamsSeedAndStep) {
  const std::vector<RowSamplingParams> params = MixedParams();
  const int64_t rows = static_cast<int64_t>(params.size());
  at::Tensor logits = RandomLogits(rows, 1000, 1);
  for (uint64_t step : {0u, 1u, 57u}) {
    const std::vector<uint64_t> steps(rows, step);
    const SampledTokens batch = SampleOrDie(logits, params, steps);
    // Alone: a batch of one, which for the plain rows means no sort at all.
    for (int64_t r = 0; r < rows; ++r) {
      const SampledTokens alone = SampleOrDie(logits.narrow(0, r, 1), {params[r]}, {step});
      EXPECT_EQ(alone.token_ids.item<int64_t>(), batch.token_ids[r].item<int64_t>()) << r;
      EXPECT_EQ(alone.logprobs.item<float>(), batch.logprobs[r].item<float>()) << r;
    }
    // Reversed, and interleaved with unrelated rows of other logits.
    at::Tensor others = RandomLogits(rows, 1000, 2);
    at::Tensor mixed = at::stack({logits.flip(0), others}, 1).reshape({2 * rows, 1000});
    std::vector<RowSamplingParams> mixed_params;
    for (int64_t r = rows - 1; r >= 0; --r) {
      mixed_params.push_back(params[r]);
      mixed_params.push_back({0.9, 0.95, 7, 1000 + static_cast<uint64_t>(r)});
    }
    const SampledTokens shuffled =
        SampleOrDie(mixed, mixed_params, std::vector<uint64_t>(2 * rows, step));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = 2 * (rows - 1 - r);
      EXPECT_EQ(shuffled.token_ids[at].item<int64_t>(), batch.token_ids[r].item<int64_t>()) << r;
      EXPECT_EQ(shuffled.logprobs[at].item<float>(), batch.logprobs[r].item<float>()) << r;
    }
  }
}

TEST(TokenSamplerTest, TheStepCounterAndTheSeedBothChangeTheDraw) {
  at::Tensor logits = at::zeros({1, 1000});  // uniform: every draw is informative
  std::vector<int64_t> by_step, by_seed;
  for (uint64_t i = 0; i < 50; ++i) {
    by_step.push_back(SampleOrDie(logits, {{1.0, 1.0, 0, 5}}, {i}).token_ids.item<int64_t>());
    by_seed.push_back(SampleOrDie(logits, {{1.0, 1.0, 0, i}}, {0}).token_ids.item<int64_t>());
  }
  std::sort(by_step.begin(), by_step.end());
  std::sort(by_seed.begin(), by_seed.end());
  // 50 draws from 1000 tokens collide rarely; a constant draw is a bug.
  EXPECT_GT(std::unique(by_step.begin(), by_step.end()) - by_step.begin(), 40);
  EXPECT_GT(std::unique(by_seed.begin(), by_seed.end()) - by_seed.begin(), 40);
}

TEST(TokenSamplerTest, GreedyTakesTheFirstArgmaxWithLogprobZeroWhateverTheSeed) {
  at::Tensor logits = at::tensor({0.5f, 3.0f, -1.0f, 3.0f, 2.0f}).unsqueeze(0).repeat({3, 1});
  const SampledTokens out =
      SampleOrDie(logits, {{0.0, 1.0, 0, 1}, {0.0, 0.5, 3, 2}, {0.0, 1.0, 0, 3}}, {0, 9, 123});
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(out.token_ids[r].item<int64_t>(), 1) << "ties go to the lower id";
    EXPECT_EQ(out.logprobs[r].item<float>(), 0.0f);
    EXPECT_EQ(out.untruncated_logprobs[r].item<float>(), 0.0f);
  }
}

TEST(TokenSamplerTest, GreedyRowsInASamplingBatchStayGreedy) {
  at::Tensor logits = RandomLogits(4, 300, 3);
  const SampledTokens out =
      SampleOrDie(logits, {{1.0, 1.0, 0, 1}, {0.0, 1.0, 0, 2}, {1.0, 0.9, 0, 3}, {0.0, 1.0, 0, 4}},
                  {0, 0, 0, 0});
  at::Tensor argmax = logits.argmax(1);
  EXPECT_EQ(out.token_ids[1].item<int64_t>(), argmax[1].item<int64_t>());
  EXPECT_EQ(out.token_ids[3].item<int64_t>(), argmax[3].item<int64_t>());
  EXPECT_EQ(out.logprobs[1].item<float>(), 0.0f);
  EXPECT_LT(out.logprobs[2].item<float>(), 0.0f);
}

TEST(TokenSamplerTest, TopKOneIsGreedyWithLogprobZeroUnderTheSamplingLaw) {
  at::Tensor logits = RandomLogits(64, 500, 4);
  for (double temperature : {0.3, 1.0, 2.5}) {
    std::vector<RowSamplingParams> params;
    for (uint64_t r = 0; r < 64; ++r) params.push_back({temperature, r % 2 ? 0.9 : 1.0, 1, r});
    const SampledTokens out = SampleOrDie(logits, params, std::vector<uint64_t>(64, 3));
    at::Tensor argmax = logits.argmax(1);
    EXPECT_TRUE(out.token_ids.equal(argmax)) << "T=" << temperature;
    EXPECT_LT(out.logprobs.abs().max().item<float>(), 1e-6) << "T=" << temperature;
    at::Tensor expected =
        at::log_softmax(logits / temperature, 1).gather(1, argmax.unsqueeze(1)).squeeze(1);
    EXPECT_TRUE(at::allclose(out.untruncated_logprobs, expected, 0, 1e-5)) << "T=" << temperature;
  }
  // Tied maxima: both pick the lower id.
  at::Tensor tied = at::tensor({1.0f, 4.0f, 4.0f}).unsqueeze(0).repeat({8, 1});
  std::vector<RowSamplingParams> top1;
  for (uint64_t r = 0; r < 8; ++r) top1.push_back({0.5 + r, 1.0, 1, r});
  const SampledTokens picked = SampleOrDie(tied, top1, std::vector<uint64_t>(8, 0));
  EXPECT_TRUE(picked.token_ids.eq(1).all().item<bool>());
}

TEST(TokenSamplerTest, TiesAtTheTopKBoundaryKeepTheLowerTokenIds) {
  const int64_t rows = 4000;
  at::Tensor logits = at::tensor({0.0f, 5.0f, 5.0f, 5.0f, 0.0f}).unsqueeze(0).expand({rows, 5});
  std::vector<RowSamplingParams> params;
  for (uint64_t r = 0; r < rows; ++r) params.push_back({1.0, 1.0, 2, r});
  const SampledTokens out = SampleOrDie(logits, params, std::vector<uint64_t>(rows, 0));
  at::Tensor counts = at::bincount(out.token_ids, {}, 5);
  EXPECT_EQ(counts[0].item<int64_t>() + counts[3].item<int64_t>() + counts[4].item<int64_t>(), 0);
  // Each of tokens 1 and 2 has probability 1/2: 5 sigma is 158 draws.
  EXPECT_NEAR(counts[1].item<int64_t>(), rows / 2, 160);
  EXPECT_NEAR(out.logprobs[0].item<float>(), std::log(0.5f), 1e-6);
}

TEST(TokenSamplerTest, Bf16LogitsSampleAsTheirFp32Values) {
  at::Tensor logits = RandomLogits(8, 400, 5).to(at::kBFloat16);
  const std::vector<RowSamplingParams> params = MixedParams();
  const std::vector<uint64_t> steps(8, 2);
  const SampledTokens from_bf16 = SampleOrDie(logits, params, steps);
  const SampledTokens from_fp32 = SampleOrDie(logits.to(at::kFloat), params, steps);
  EXPECT_TRUE(from_bf16.token_ids.equal(from_fp32.token_ids));
  EXPECT_TRUE(from_bf16.logprobs.equal(from_fp32.logprobs));
  EXPECT_EQ(from_bf16.logprobs.scalar_type(), at::kFloat);
}

TEST(TokenSamplerTest, ReturnsOneInt64TokenPerRowAndUntruncatedOnlyOnRequest) {
  at::Tensor logits = RandomLogits(3, 50, 6);
  const SampledTokens out =
      SampleOrDie(logits, {{1.0, 1.0, 0, 1}, {1.0, 1.0, 0, 2}, {1.0, 1.0, 0, 3}}, {0, 0, 0},
                  /*untruncated=*/false);
  EXPECT_EQ(out.token_ids.sizes(), at::IntArrayRef({3}));
  EXPECT_EQ(out.token_ids.scalar_type(), at::kLong);
  EXPECT_EQ(out.logprobs.sizes(), at::IntArrayRef({3}));
  EXPECT_FALSE(out.untruncated_logprobs.defined());
}

TEST(TokenSamplerTest, WithoutTruncationBothLogprobsAreTheSameNumber) {
  at::Tensor logits = RandomLogits(2, 50, 7);
  const SampledTokens out = SampleOrDie(logits, {{0.8, 1.0, 0, 1}, {1.0, 1.0, 50, 2}}, {4, 4});
  EXPECT_TRUE(out.logprobs.equal(out.untruncated_logprobs));
}

absl::Status SampleStatus(const at::Tensor& logits, const std::vector<RowSamplingParams>& params,
                          const std::vector<uint64_t>& steps) {
  return TokenSampler().Sample(logits, params, steps).status();
}

TEST(TokenSamplerTest, RejectsBadInputsNamingWhatIsWrong) {
  const RowSamplingParams ok;
  const absl::Status not_2d = SampleStatus(at::zeros({5}), {ok}, {0});
  EXPECT_EQ(not_2d.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_2d.message(), HasSubstr("[5]"));
  const absl::Status empty_vocab = SampleStatus(at::zeros({1, 0}), {ok}, {0});
  EXPECT_EQ(empty_vocab.code(), absl::StatusCode::kInvalidArgument);
  const absl::Status integers = SampleStatus(at::zeros({1, 4}, at::kLong), {ok}, {0});
  EXPECT_EQ(integers.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(integers.message(), HasSubstr("Long"));
  const absl::Status count = SampleStatus(at::zeros({2, 4}), {ok}, {0, 0});
  EXPECT_EQ(count.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(count.message(), HasSubstr("2 rows but 1 params"));
  EXPECT_EQ(SampleStatus(at::Tensor(), {ok}, {0}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenSamplerTest, RejectsInvalidParametersNamingTheRowFieldAndValue) {
  const absl::Status status =
      SampleStatus(at::zeros({2, 4}), {{1.0, 1.0, 0, 0}, {1.0, 1.5, 0, 0}}, {0, 0});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("rows[1].top_p: 1.5"));
}

}  // namespace
}  // namespace kforge
