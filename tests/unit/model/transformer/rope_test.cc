// Rotary embedding: the inverse frequencies against transformers' formulas
// (evaluated here in double precision, independently of the library's tensor
// code), and the rotate-half application against an explicit pair rotation.
#include "model/transformer/rope.h"

#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

ModelConfig RopeConfig(int64_t head_dim, double theta) {
  ModelConfig config;
  config.head_dim = head_dim;
  config.rope_theta = theta;
  return config;
}

std::vector<double> DefaultInverseFrequencies(int64_t dim, double theta) {
  std::vector<double> out;
  for (int64_t i = 0; i < dim; i += 2) {
    out.push_back(1.0 / std::pow(theta, static_cast<double>(i) / static_cast<double>(dim)));
  }
  return out;
}

// transformers' _compute_llama3_parameters, one frequency at a time.
std::vector<double> Llama3InverseFrequencies(int64_t dim, double theta, const RopeScaling& s) {
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / s.low_freq_factor;
  const double high_freq_wavelen = old_context / s.high_freq_factor;
  std::vector<double> out;
  for (double freq : DefaultInverseFrequencies(dim, theta)) {
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_freq_wavelen) {
      out.push_back(freq);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back(freq / s.factor);
    } else {
      const double smooth =
          (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      out.push_back((1 - smooth) * freq / s.factor + smooth * freq);
    }
  }
  return out;
}

void ExpectRelativelyClose(const at::Tensor& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  ASSERT_EQ(actual.scalar_type(), at::kFloat);
  for (size_t i = 0; i < expected.size(); ++i) {
    const double value = actual[static_cast<int64_t>(i)].item<double>();
    EXPECT_NEAR(value, expected[i], 2e-6 * std::abs(expected[i])) << "frequency " << i;
  }
}

RopeScaling Llama3Scaling(double factor) {
  RopeScaling s;
  s.type = "llama3";
  s.factor = factor;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_position_embeddings = 8192;
  return s;
}

TEST(RopeTest, DefaultFrequenciesArePowersOfTheta) {
  const ModelConfig config = RopeConfig(128, 1000000.0);
  ExpectRelativelyClose(RopeInverseFrequencies(config), DefaultInverseFrequencies(128, 1e6));
}

TEST(RopeTest, Llama31ScalingMatchesTransformers) {
  ModelConfig config = RopeConfig(128, 500000.0);
  config.rope_scaling = Llama3Scaling(8.0);
  const std::vector<double> expected = Llama3InverseFrequencies(128, 500000.0, config.rope_scaling);
  const at::Tensor actual = RopeInverseFrequencies(config);
  ExpectRelativelyClose(actual, expected);
  // All three bands occur: highest frequency kept, lowest divided by 8, and
  // some interpolated in between.
  const std::vector<double> plain = DefaultInverseFrequencies(128, 500000.0);
  EXPECT_DOUBLE_EQ(expected.front(), plain.front());
  EXPECT_NEAR(expected.back(), plain.back() / 8.0, 1e-12);
  int interpolated = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const double ratio = expected[i] / plain[i];
    interpolated += ratio < 0.999 && ratio > 1.001 / 8.0 ? 1 : 0;
  }
  EXPECT_GT(interpolated, 0);
}

TEST(RopeTest, Llama32ScalingFactor32MatchesTransformers) {
  ModelConfig config = RopeConfig(64, 500000.0);
  config.rope_scaling = Llama3Scaling(32.0);
  ExpectRelativelyClose(RopeInverseFrequencies(config),
                        Llama3InverseFrequencies(64, 500000.0, config.rope_scaling));
}

TEST(RopeTest, ScalingChangesTheFrequencies) {
  ModelConfig scaled = RopeConfig(128, 500000.0);
  scaled.rope_scaling = Llama3Scaling(8.0);
  const at::Tensor difference =
      RopeInverseFrequencies(scaled) - RopeInverseFrequencies(RopeConfig(128, 500000.0));
  EXPECT_GT(difference.abs().max().item<double>(), 1e-6);
}

TEST(RopeTest, RotatesEachHalfPairByPositionTimesFrequency) {
  const int64_t dim = 8, half = dim / 2;
  const at::Tensor inv_freq = RopeInverseFrequencies(RopeConfig(dim, 10000.0));
  const at::Tensor positions = at::tensor({0, 3, 17}, at::kLong).unsqueeze(0);  // [1, 3]
  at::manual_seed(7);
  const at::Tensor x = at::randn({1, 2, 3, dim});  // [B, heads, T, D]
  const at::Tensor rotated = ApplyRope(x, MakeRopeTables(inv_freq, positions, at::kFloat));
  for (int64_t head = 0; head < 2; ++head) {
    for (int64_t t = 0; t < 3; ++t) {
      const double pos = positions[0][t].item<double>();
      for (int64_t i = 0; i < half; ++i) {
        const double angle = pos * inv_freq[i].item<double>();
        const double a = x[0][head][t][i].item<double>();
        const double b = x[0][head][t][i + half].item<double>();
        EXPECT_NEAR(rotated[0][head][t][i].item<double>(),
                    a * std::cos(angle) - b * std::sin(angle), 1e-5);
        EXPECT_NEAR(rotated[0][head][t][i + half].item<double>(),
                    b * std::cos(angle) + a * std::sin(angle), 1e-5);
      }
    }
  }
}

TEST(RopeTest, TablesAreCastToTheActivationDtype) {
  const at::Tensor inv_freq = RopeInverseFrequencies(RopeConfig(8, 10000.0));
  const RopeTables tables =
      MakeRopeTables(inv_freq, at::arange(4, at::kLong).unsqueeze(0), at::kBFloat16);
  EXPECT_EQ(tables.cos.scalar_type(), at::kBFloat16);
  EXPECT_EQ(tables.cos.sizes(), (std::vector<int64_t>{1, 1, 4, 8}));
}

}  // namespace
}  // namespace kforge
