// GRPO and supervised losses and their gradients against values worked out
// by hand on tiny tensors.
#include "learner/training/policy_loss.h"

#include <cmath>

#include <gtest/gtest.h>

namespace kforge {
namespace {

at::Tensor Floats(std::vector<float> values) {
  return at::tensor(at::ArrayRef<float>(values), at::kFloat);
}

TEST(GroupAdvantages, CentresAndScalesBySampleStd) {
  // mean 2, sample std sqrt(((1)^2 + 0 + 1^2) / 2) = 1.
  const std::vector<double> adv = GroupAdvantages({1.0, 2.0, 3.0}, true, 0.0);
  ASSERT_EQ(adv.size(), 3u);
  EXPECT_NEAR(adv[0], -1.0, 1e-12);
  EXPECT_NEAR(adv[1], 0.0, 1e-12);
  EXPECT_NEAR(adv[2], 1.0, 1e-12);
}

TEST(GroupAdvantages, WithoutStdScalingOnlyCentres) {
  const std::vector<double> adv = GroupAdvantages({0.0, 4.0}, false);
  EXPECT_DOUBLE_EQ(adv[0], -2.0);
  EXPECT_DOUBLE_EQ(adv[1], 2.0);
}

TEST(GroupAdvantages, EqualRewardsAndSingletonsGiveZeros) {
  for (double a : GroupAdvantages({0.7, 0.7, 0.7}, true)) EXPECT_EQ(a, 0.0);
  for (double a : GroupAdvantages({0.7}, true)) EXPECT_EQ(a, 0.0);
}

TEST(GrpoLoss, MatchesHandComputedClippedSurrogateAndGradient) {
  // Token 0: ratio e^0.5 = 1.6487 > 1 + 0.28, A = +1: clipped, loss -1.28,
  //   no gradient (the clipped branch is the minimum).
  // Token 1: ratio 1, A = -2: loss +2, d/dlogp = -A * ratio = 2.
  // Token 2: masked out.
  at::Tensor logp = Floats({0.0f, -1.0f, -3.0f}).requires_grad_(true);
  PolicyLossInputs in{.logprobs = logp,
                      .old_logprobs = Floats({-0.5f, -1.0f, 0.0f}),
                      .advantages = Floats({1.0f, -2.0f, 5.0f}),
                      .mask = Floats({1.0f, 1.0f, 0.0f})};
  PolicyLoss loss = GrpoLoss(in, {.clip_low = 0.2, .clip_high = 0.28}, /*normaliser=*/2.0);
  EXPECT_NEAR(loss.loss.item<double>(), (-1.28 + 2.0) / 2.0, 1e-6);
  loss.loss.backward();
  const at::Tensor grad = logp.grad();
  EXPECT_NEAR(grad[0].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(grad[1].item<double>(), 2.0 / 2.0, 1e-6);
  EXPECT_NEAR(grad[2].item<double>(), 0.0, 1e-7);
  EXPECT_DOUBLE_EQ(loss.clipped_tokens(), 1.0);
  EXPECT_DOUBLE_EQ(loss.tokens(), 2.0);
}

TEST(GrpoLoss, NegativeAdvantageClipsAtTheLowBound) {
  // ratio e^-1 = 0.3679 < 1 - 0.2 with A = -1: min(-0.368, -0.8) = -0.8,
  // so the loss is 0.8 and the gradient is zero.
  at::Tensor logp = Floats({-2.0f}).requires_grad_(true);
  PolicyLossInputs in{.logprobs = logp, .old_logprobs = Floats({-1.0f}),
                      .advantages = Floats({-1.0f}), .mask = Floats({1.0f})};
  PolicyLoss loss = GrpoLoss(in, {.clip_low = 0.2, .clip_high = 0.28}, 1.0);
  EXPECT_NEAR(loss.loss.item<double>(), 0.8, 1e-6);
  loss.loss.backward();
  EXPECT_NEAR(logp.grad()[0].item<double>(), 0.0, 1e-7);
}

TEST(GrpoLoss, K3KlTermAndItsGradient) {
  // logp = ref - 1: delta = 1, k3 = e - 1 - 1 = 0.71828; d k3 / d logp =
  // -(e^delta - 1) = -(e - 1). With A = 0 the policy term vanishes.
  at::Tensor logp = Floats({-2.0f}).requires_grad_(true);
  PolicyLossInputs in{.logprobs = logp, .old_logprobs = Floats({-2.0f}),
                      .advantages = Floats({0.0f}), .ref_logprobs = Floats({-1.0f}),
                      .mask = Floats({1.0f})};
  PolicyLoss loss = GrpoLoss(in, {.kl_coef = 0.5}, 1.0);
  EXPECT_NEAR(loss.loss.item<double>(), 0.5 * (std::exp(1.0) - 2.0), 1e-6);
  EXPECT_NEAR(loss.kl_sum(), std::exp(1.0) - 2.0, 1e-6);
  loss.loss.backward();
  EXPECT_NEAR(logp.grad()[0].item<double>(), -0.5 * (std::exp(1.0) - 1.0), 1e-5);
}

TEST(GrpoLoss, K3KlTermIsClampedAtKlMaxAndStaysFinite) {
  // Token 0: delta = 1, k3 = 0.718 (under the ceiling, with its gradient).
  // Token 1: delta = 5, k3 = e^5 - 6 = 142.4: clamped to 10, no gradient.
  // Token 2: delta = 200: exp would overflow float32; clamped, finite.
  at::Tensor logp = Floats({-2.0f, -6.0f, -201.0f}).requires_grad_(true);
  PolicyLossInputs in{.logprobs = logp, .old_logprobs = Floats({-2.0f, -6.0f, -201.0f}),
                      .advantages = Floats({0.0f, 0.0f, 0.0f}),
                      .ref_logprobs = Floats({-1.0f, -1.0f, -1.0f}),
                      .mask = Floats({1.0f, 1.0f, 1.0f})};
  PolicyLoss loss = GrpoLoss(in, {.kl_coef = 0.5, .kl_max = 10.0}, 1.0);
  EXPECT_NEAR(loss.kl_sum(), (std::exp(1.0) - 2.0) + 10.0 + 10.0, 1e-4);
  loss.loss.backward();
  EXPECT_NEAR(logp.grad()[0].item<double>(), -0.5 * (std::exp(1.0) - 1.0), 1e-5);
  EXPECT_EQ(logp.grad()[1].item<double>(), 0.0);
  EXPECT_EQ(logp.grad()[2].item<double>(), 0.0);
  // Unclamped (kl_max 0), token 1 counts in full.
  at::Tensor logp2 = Floats({-6.0f}).requires_grad_(true);
  PolicyLossInputs one{.logprobs = logp2, .old_logprobs = Floats({-6.0f}),
                       .advantages = Floats({0.0f}), .ref_logprobs = Floats({-1.0f}),
                       .mask = Floats({1.0f})};
  EXPECT_NEAR(GrpoLoss(one, {.kl_coef = 0.5}, 1.0).kl_sum(), std::exp(5.0) - 6.0, 1e-3);
}

TEST(TruncatedImportanceWeights, AreTheOldOverSamplerRatioCappedAtTheCap) {
  // exp(-1 - -2) = e = 2.718 > 2: capped to 2. exp(-1 - -1.5) = e^0.5 =
  // 1.6487: kept. exp(-2 - -1) = e^-1 = 0.3679: kept (the cap is above only).
  const at::Tensor w = TruncatedImportanceWeights(Floats({-1.0f, -1.0f, -2.0f}),
                                                  Floats({-2.0f, -1.5f, -1.0f}), 2.0);
  EXPECT_NEAR(w[0].item<double>(), 2.0, 1e-6);
  EXPECT_NEAR(w[1].item<double>(), std::exp(0.5), 1e-6);
  EXPECT_NEAR(w[2].item<double>(), std::exp(-1.0), 1e-6);
}

TEST(GrpoLoss, TisWeightsThePolicyTermAndItsGradientOnHandWorkedNumbers) {
  // Both tokens on the learner's old policy (ratio 1, unclipped), A = +1:
  // pg = -1 each. Token 0 was drawn by a sampler that found it e times less
  // likely (w = min(e, 2) = 2), token 1 by one that found it e^0.5 times
  // less likely (w = e^0.5). loss = (-2 - e^0.5) / 2; d loss / d logp_i =
  // -A * ratio * w_i / 2.
  at::Tensor logp = Floats({-1.0f, -1.0f}).requires_grad_(true);
  PolicyLossInputs in{.logprobs = logp,
                      .old_logprobs = Floats({-1.0f, -1.0f}),
                      .advantages = Floats({1.0f, 1.0f}),
                      .mask = Floats({1.0f, 1.0f}),
                      .sampler_logprobs = Floats({-2.0f, -1.5f})};
  PolicyLoss loss = GrpoLoss(in, {.clip_low = 0.2, .clip_high = 0.28, .tis_cap = 2.0}, 2.0);
  EXPECT_NEAR(loss.loss.item<double>(), (-2.0 - std::exp(0.5)) / 2.0, 1e-6);
  loss.loss.backward();
  EXPECT_NEAR(logp.grad()[0].item<double>(), -2.0 / 2.0, 1e-6);
  EXPECT_NEAR(logp.grad()[1].item<double>(), -std::exp(0.5) / 2.0, 1e-6);
  // Token 0's weight was cut to the cap, token 1's was not.
  EXPECT_EQ(loss.tis_capped_tokens(), 1.0);
}

TEST(GrpoLoss, CountsCappedTokensOnlyAmongCountedOnesAndOnlyWithTis) {
  // Weights e^2, e^2 and e^-1 against a cap of 2; the second token is
  // masked out (padding), so one counted token was capped.
  PolicyLossInputs in{.logprobs = Floats({-1.0f, -1.0f, -1.0f}),
                      .old_logprobs = Floats({-1.0f, -1.0f, -1.0f}),
                      .advantages = Floats({1.0f, 1.0f, 1.0f}),
                      .mask = Floats({1.0f, 0.0f, 1.0f}),
                      .sampler_logprobs = Floats({-3.0f, -3.0f, 0.0f})};
  EXPECT_EQ(GrpoLoss(in, {.tis_cap = 2.0}, 2.0).tis_capped_tokens(), 1.0);
  EXPECT_EQ(GrpoLoss(in, {.tis_cap = 0.0}, 2.0).tis_capped_tokens(), 0.0);
  in.sampler_logprobs = at::Tensor();
  EXPECT_EQ(GrpoLoss(in, {.tis_cap = 2.0}, 2.0).tis_capped_tokens(), 0.0);
}

TEST(GrpoLoss, ASampleDrawnByTheTrainedPolicyIsUnchangedByTis) {
  // Sampler and learner agree (weight exp(0) = 1, within any cap): the loss
  // and gradient are those without the correction, the clipped token too.
  const auto run = [](bool with_sampler, double cap) {
    at::Tensor logp = Floats({0.0f, -1.0f}).requires_grad_(true);
    PolicyLossInputs in{.logprobs = logp,
                        .old_logprobs = Floats({-0.5f, -1.0f}),
                        .advantages = Floats({1.0f, -2.0f}),
                        .mask = Floats({1.0f, 1.0f})};
    if (with_sampler) in.sampler_logprobs = Floats({-0.5f, -1.0f});
    PolicyLoss loss = GrpoLoss(in, {.clip_low = 0.2, .clip_high = 0.28, .tis_cap = cap}, 2.0);
    loss.loss.backward();
    return std::make_pair(loss.loss.item<double>(), logp.grad().clone());
  };
  const auto [plain, plain_grad] = run(false, 0.0);
  const auto [weighted, weighted_grad] = run(true, 2.0);
  EXPECT_NEAR(weighted, plain, 1e-7);
  EXPECT_TRUE(at::allclose(weighted_grad, plain_grad));
}

TEST(GrpoLoss, TisCapZeroTurnsTheCorrectionOff) {
  at::Tensor logp = Floats({-1.0f}).requires_grad_(true);
  PolicyLossInputs in{.logprobs = logp, .old_logprobs = Floats({-1.0f}),
                      .advantages = Floats({1.0f}), .mask = Floats({1.0f}),
                      .sampler_logprobs = Floats({-3.0f})};
  EXPECT_NEAR(GrpoLoss(in, {.tis_cap = 0.0}, 1.0).loss.item<double>(), -1.0, 1e-6);
}

TEST(SupervisedLoss, IsTheMeanNegativeLogLikelihoodOfCountedTokens) {
  at::Tensor logp = Floats({-1.0f, -3.0f, -7.0f}).requires_grad_(true);
  PolicyLossInputs in{.logprobs = logp, .mask = Floats({1.0f, 1.0f, 0.0f})};
  PolicyLoss loss = SupervisedLoss(in, 2.0);
  EXPECT_NEAR(loss.loss.item<double>(), 2.0, 1e-6);
  loss.loss.backward();
  EXPECT_NEAR(logp.grad()[0].item<double>(), -0.5, 1e-7);
  EXPECT_NEAR(logp.grad()[2].item<double>(), 0.0, 1e-7);
}

}  // namespace
}  // namespace kforge
