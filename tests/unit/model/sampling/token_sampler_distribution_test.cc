// TokenSampler draws from the documented distribution: softmax(z / T)
// restricted to top-k ∩ top-p (both on the tempered distribution) and
// renormalised, and reports log q(token) of exactly that distribution.
//
// Each configuration draws kDraws tokens as one batch of rows that differ
// only in seed and step, and compares the counts with an exact reference
// computed here in double. Thresholds are 5 binomial standard errors per
// token and a 5-sigma chi-square bound, so a correct sampler passes (the
// seeds are fixed, so the test is deterministic) while a sampler whose law
// differs by more than ~0.5% absolute on any token fails. Each configuration
// also runs with the logits on a GPU where there is one: rows that keep every
// token then go through the fused sampling kernel (model/kernels).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <ostream>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/sampling/token_sampler.h"

namespace kforge {
namespace {

constexpr int64_t kDraws = 200000;
constexpr double kSigmas = 5.0;

// Distinct values, a long tail and one masked (-inf) token, as a padded
// vocabulary has.
const std::vector<float> kLogits = {2.0f,  1.5f,  1.2f,  0.9f,  0.5f, 0.1f,
                                    -0.3f, -1.0f, -2.0f, -4.0f, -INFINITY};

struct Config {
  double temperature;
  double top_p;
  int32_t top_k;
};

std::ostream& operator<<(std::ostream& os, const Config& c) {
  return os << "T=" << c.temperature << " top_p=" << c.top_p << " top_k=" << c.top_k;
}

std::vector<double> TemperedSoftmax(double temperature) {
  std::vector<double> p(kLogits.size());
  const double max = *std::max_element(kLogits.begin(), kLogits.end());
  for (size_t v = 0; v < p.size(); ++v) p[v] = std::exp((kLogits[v] - max) / temperature);
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= sum;
  return p;
}

// The reference law, written independently of the sampler: rank by tempered
// probability, keep rank i if i < top_k and the mass of ranks < i is below
// top_p, renormalise. Asserts the configuration is not within 1e-4 of a
// top-p boundary, where fp32 and fp64 could disagree on the kept set.
std::vector<double> Target(const Config& c) {
  std::vector<double> p = TemperedSoftmax(c.temperature);
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  std::vector<double> q(p.size(), 0.0);
  double before = 0, kept = 0;
  for (size_t rank = 0; rank < order.size(); ++rank) {
    const size_t v = order[rank];
    if (c.top_p < 1) {
      EXPECT_GT(std::abs(before - c.top_p), 1e-4) << c;
    }
    if ((c.top_k == 0 || rank < static_cast<size_t>(c.top_k)) &&
        (c.top_p >= 1 || before < c.top_p)) {
      q[v] = p[v];
      kept += p[v];
    }
    before += p[v];
  }
  for (double& x : q) x /= kept;
  return q;
}

struct Draws {
  std::vector<int64_t> tokens;
  std::vector<float> logprobs;
  std::vector<float> untruncated;
};

// kDraws rows of the same logits; row i has seed base + i % 1000 and step
// i / 1000, so both the seed and the step counter feed the randomness.
Draws Draw(const Config& c, uint64_t base_seed, bool cuda) {
  const int64_t vocab = static_cast<int64_t>(kLogits.size());
  at::Tensor logits = at::tensor(kLogits).unsqueeze(0).expand({kDraws, vocab});
  if (cuda) logits = logits.to(at::kCUDA);
  std::vector<RowSamplingParams> params(kDraws);
  std::vector<uint64_t> steps(kDraws);
  for (int64_t i = 0; i < kDraws; ++i) {
    params[i] = {c.temperature, c.top_p, c.top_k, base_seed + static_cast<uint64_t>(i % 1000)};
    steps[i] = static_cast<uint64_t>(i / 1000);
  }
  TokenSampler sampler({.untruncated_logprobs = true});
  absl::StatusOr<SampledTokens> out = sampler.Sample(logits, params, steps);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  auto to_vector = [](const at::Tensor& t, auto zero) {
    using T = decltype(zero);
    at::Tensor c = t.cpu().contiguous();
    return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
  };
  return {to_vector(out->token_ids, int64_t{0}), to_vector(out->logprobs, 0.0f),
          to_vector(out->untruncated_logprobs, 0.0f)};
}

// The chi-square quantile at kSigmas by Wilson-Hilferty (accurate to a few
// percent for df >= 1, far finer than the effects the test must catch).
double ChiSquareBound(int dof) {
  const double a = 2.0 / (9.0 * dof);
  return dof * std::pow(1 - a + kSigmas * std::sqrt(a), 3);
}

// (configuration, logits on a CUDA device)
class DistributionTest : public ::testing::TestWithParam<std::tuple<Config, bool>> {
 protected:
  void SetUp() override {
    if (cuda() && !at::hasCUDA()) GTEST_SKIP() << "no CUDA device in this LibTorch build or machine";
  }
  Config config() const { return std::get<0>(GetParam()); }
  bool cuda() const { return std::get<1>(GetParam()); }
};

TEST_P(DistributionTest, EmpiricalFrequenciesMatchTheTruncatedRenormalisedSoftmax) {
  const Config c = config();
  const std::vector<double> q = Target(c);
  const Draws draws = Draw(c, /*base_seed=*/1000, cuda());
  ASSERT_EQ(draws.tokens.size(), static_cast<size_t>(kDraws));
  std::vector<int64_t> counts(q.size(), 0);
  for (int64_t t : draws.tokens) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, static_cast<int64_t>(q.size()));
    ++counts[t];
  }
  double chi_square = 0;
  int support = 0;
  for (size_t v = 0; v < q.size(); ++v) {
    if (q[v] == 0) {
      EXPECT_EQ(counts[v], 0) << c << ": token " << v << " is outside top-k ∩ top-p";
      continue;
    }
    ++support;
    const double expected = kDraws * q[v];
    const double sigma = std::sqrt(kDraws * q[v] * (1 - q[v]));
    EXPECT_LE(std::abs(counts[v] - expected), kSigmas * sigma)
        << c << ": token " << v << " drawn " << counts[v] << " times, expected " << expected;
    chi_square += (counts[v] - expected) * (counts[v] - expected) / expected;
  }
  if (support > 1) {
    EXPECT_LE(chi_square, ChiSquareBound(support - 1)) << c;
  }
}

TEST_P(DistributionTest, LogprobIsLogOfTheTargetProbabilityOfTheSampledToken) {
  const Config c = config();
  const std::vector<double> q = Target(c);
  const std::vector<double> p = TemperedSoftmax(c.temperature);
  const Draws draws = Draw(c, /*base_seed=*/77, cuda());
  ASSERT_EQ(draws.tokens.size(), static_cast<size_t>(kDraws));
  for (size_t i = 0; i < draws.tokens.size(); ++i) {
    const int64_t t = draws.tokens[i];
    ASSERT_NEAR(draws.logprobs[i], std::log(q[t]), 1e-5) << c << ": row " << i;
    ASSERT_NEAR(draws.untruncated[i], std::log(p[t]), 1e-5) << c << ": row " << i;
  }
}

// Several configurations keep a different set when temperature is applied
// after top-p (1.3/0.8, 0.5/0.9, 2/0.7/5, 1.5/0.95), so that mistake fails.
INSTANTIATE_TEST_SUITE_P(
    Configs, DistributionTest,
    ::testing::Combine(
        ::testing::Values(Config{1.0, 1.0, 0}, Config{0.7, 1.0, 0}, Config{1.0, 1.0, 4},
                          Config{1.3, 0.8, 0}, Config{0.5, 0.9, 0}, Config{2.0, 0.7, 5},
                          Config{0.6, 0.75, 3}, Config{1.5, 0.95, 0}, Config{1.0, 1.0, 100}),
        ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Config, bool>>& info) {
      return absl::StrCat("Case", info.index, std::get<1>(info.param) ? "Cuda" : "Cpu");
    });

}  // namespace
}  // namespace kforge
