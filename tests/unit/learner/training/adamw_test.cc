// AdamW and the learning-rate schedule against hand-computed values.
#include "learner/training/adamw.h"

#include <cmath>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "model/torch_runtime.h"

namespace kforge {
namespace {

TEST(LearningRate, WarmsUpLinearlyThenDecaysToTheFloor) {
  const LearningRateSchedule s{.peak = 1.0, .warmup_steps = 4, .total_steps = 14, .min_lr_ratio = 0.1};
  EXPECT_DOUBLE_EQ(LearningRate(s, 0), 0.25);
  EXPECT_DOUBLE_EQ(LearningRate(s, 3), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(s, 4), 1.0);
  EXPECT_NEAR(LearningRate(s, 9), 1.0 - 0.5 * 0.9, 1e-12);
  EXPECT_NEAR(LearningRate(s, 14), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(s, 100), 0.1, 1e-12);
}

TEST(AdamW, FirstStepMovesEachWeightByLearningRateTimesSignOfGradient) {
  // After one step m/(1-b1) = g and v/(1-b2) = g^2, so the update is
  // lr * g / (|g| + eps), plus decoupled decay lr * wd * w for matrices.
  at::Tensor matrix = at::full({2, 2}, 1.0, at::kFloat);
  at::Tensor bias = at::full({2}, 1.0, at::kFloat);
  AdamW opt({{"m", matrix}, {"b", bias}}, {.weight_decay = 0.1});
  const at::Tensor weights = at::tensor({1.0f, -2.0f, 3.0f, 0.5f}).reshape({2, 2});
  (matrix * weights).sum().add((bias * 3).sum()).backward();
  const double norm = opt.ClipGradNorm(0);
  EXPECT_NEAR(norm, std::sqrt(1 + 4 + 9 + 0.25 + 9 + 9), 1e-5);
  opt.Step(0.01);
  EXPECT_NEAR(matrix[0][0].item<double>(), 1.0 * (1 - 0.001) - 0.01, 1e-6);
  EXPECT_NEAR(matrix[0][1].item<double>(), 1.0 * (1 - 0.001) + 0.01, 1e-6);
  EXPECT_NEAR(bias[0].item<double>(), 1.0 - 0.01, 1e-6);  // no decay on vectors
  EXPECT_EQ(opt.steps(), 1);
}

TEST(AdamW, ClippingScalesGradientsToTheBound) {
  at::Tensor w = at::zeros({2}, at::kFloat);
  AdamW opt({{"w", w}}, {});
  (w * at::tensor({3.0f, 4.0f})).sum().backward();
  EXPECT_NEAR(opt.ClipGradNorm(1.0), 5.0, 1e-6);
  EXPECT_NEAR(w.grad().norm().item<double>(), 1.0, 1e-5);
}

TEST(AdamW, Bf16ParametersKeepAnFp32MasterSoTinyUpdatesAccumulate) {
  // 1 + 1e-4 is 1 in bf16; ten such updates must still add up in the master.
  at::Tensor w = at::ones({1}, at::kBFloat16);
  AdamW opt({{"w", w}}, {});
  for (int i = 0; i < 10; ++i) {
    opt.ZeroGrad();
    (w.to(at::kFloat) * -1.0).sum().backward();
    opt.Step(1e-4);
  }
  bool found = false;
  for (const auto& [name, tensor] : opt.StateTensors()) {
    if (name == "master/w") {
      found = true;
      EXPECT_NEAR(tensor[0].item<double>(), 1.001, 1e-5);
    }
  }
  EXPECT_TRUE(found);
}

TEST(AdamW, StateRoundTripsThroughLoadState) {
  at::Tensor a = at::ones({3}, at::kFloat);
  AdamW first({{"a", a}}, {});
  (a * 2).sum().backward();
  first.Step(0.1);
  std::unordered_map<std::string, at::Tensor> saved;
  for (const auto& [name, t] : first.StateTensors()) saved[name] = t.clone();
  at::Tensor b = a.detach().clone();
  AdamW second({{"a", b}}, {});
  ASSERT_TRUE(second.LoadState(saved, first.steps()).ok());
  first.ZeroGrad();
  (a * 2).sum().backward();
  first.Step(0.1);
  (b * 2).sum().backward();
  second.Step(0.1);
  EXPECT_TRUE(at::allclose(a, b));
  saved.erase("exp_avg/a");
  absl::Status missing = second.LoadState(saved, 1);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("exp_avg/a"), std::string::npos);
}

TEST(AdamW, OnCudaTheFusedKernelMatchesTheMultiTensorPasses) {
  if (!DescribeTorchRuntime().cuda_available) GTEST_SKIP() << "no CUDA device in this LibTorch";
  at::manual_seed(7);
  const at::TensorOptions bf16 = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  const std::vector<at::Tensor> start = {at::randn({64, 48}, bf16), at::randn({48}, bf16),
                                         at::randn({3, 5, 7}, bf16)};
  auto make = [&](bool fused) {
    std::vector<std::pair<std::string, at::Tensor>> params;
    for (size_t i = 0; i < start.size(); ++i) {
      params.emplace_back("p" + std::to_string(i), start[i].clone());
    }
    return std::make_pair(params, std::make_unique<AdamW>(
                                      params, AdamWParams{.weight_decay = 0.1, .fused = fused}));
  };
  auto [fused_params, fused] = make(true);
  auto [plain_params, plain] = make(false);
  if (!fused->fused()) GTEST_SKIP() << "this LibTorch has no fused AdamW kernel";
  EXPECT_FALSE(plain->fused());
  for (int step = 0; step < 3; ++step) {
    for (auto* side : {&fused_params, &plain_params}) {
      AdamW& opt = side == &fused_params ? *fused : *plain;
      opt.ZeroGrad();
      at::Tensor loss = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA));
      at::manual_seed(100 + step);  // the same gradients on both sides
      for (auto& [name, p] : *side) {
        loss = loss + (p.to(at::kFloat) * at::randn_like(p, at::kFloat)).sum();
      }
      loss.backward();
      opt.Step(1e-2 * (step + 1));
    }
  }
  std::unordered_map<std::string, at::Tensor> fused_state, plain_state;
  for (const auto& [name, t] : fused->StateTensors()) fused_state[name] = t;
  for (const auto& [name, t] : plain->StateTensors()) plain_state[name] = t;
  ASSERT_EQ(fused_state.size(), plain_state.size());
  for (const auto& [name, t] : fused_state) {
    EXPECT_TRUE(at::allclose(t, plain_state.at(name), 1e-5, 1e-6)) << name;
  }
  for (size_t i = 0; i < start.size(); ++i) {
    // bf16 parameters: the masters above agree to 1e-5, their roundings to one bf16 step.
    EXPECT_TRUE(at::allclose(fused_params[i].second, plain_params[i].second, 1e-2, 1e-2))
        << "p" << i;
    EXPECT_FALSE(at::equal(fused_params[i].second, start[i])) << "p" << i << " did not move";
  }
}

}  // namespace
}  // namespace kforge
