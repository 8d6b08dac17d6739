// Per-turn credit of multi-turn trajectories, pinned on examples worked by
// hand: discounted returns, the group-mean and leave-one-out baselines per
// turn, turns only one trajectory reached, and the best turn.
#include "learner/rewards/turn_credit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kTol = 1e-12;

TEST(DiscountedReturnsTest, EachTurnGetsItsRewardAndTheDiscountedLaterOnes) {
  // 0.1 + 0.4 x 0.5 + 0.16 x 1.0 = 0.46; 0.5 + 0.4 x 1.0 = 0.9; 1.0.
  EXPECT_THAT(DiscountedReturns({0.1, 0.5, 1.0}, 0.4),
              ElementsAre(DoubleNear(0.46, kTol), DoubleNear(0.9, kTol), DoubleNear(1.0, kTol)));
  EXPECT_THAT(DiscountedReturns({0.1, 0.5, 1.0}, 0.0), ElementsAre(0.1, 0.5, 1.0));
  EXPECT_THAT(DiscountedReturns({0.1, 0.5, 1.0}, 1.0),
              ElementsAre(DoubleNear(1.6, kTol), DoubleNear(1.5, kTol), DoubleNear(1.0, kTol)));
  EXPECT_TRUE(DiscountedReturns({}, 0.4).empty());
}

// Three trajectories at gamma 0.4: A took three turns (0.1, 0.5, 1.0), B two
// (0.3, 1.0), C was right at once (1.0). Returns: A 0.46, 0.9, 1.0; B 0.7,
// 1.0; C 1.0.
const std::vector<std::vector<double>> kGroup = {{0.1, 0.5, 1.0}, {0.3, 1.0}, {1.0}};

TEST(TurnAdvantagesTest, LeaveOneOutComparesEachTurnWithTheOtherTrajectoriesAtIt) {
  absl::StatusOr<std::vector<std::vector<double>>> adv =
      TurnAdvantages(kGroup, {.gamma = 0.4, .baseline = TurnBaseline::kLeaveOneOut});
  ASSERT_TRUE(adv.ok()) << adv.status();
  // Turn 0: A 0.46 - (0.7 + 1.0)/2 = -0.39; B 0.7 - (0.46 + 1.0)/2 = -0.03;
  // C 1.0 - (0.46 + 0.7)/2 = 0.42. Turn 1: A 0.9 - 1.0; B 1.0 - 0.9. Turn 2:
  // only A reached it: 0.
  EXPECT_THAT((*adv)[0], ElementsAre(DoubleNear(-0.39, kTol), DoubleNear(-0.1, kTol), 0.0));
  EXPECT_THAT((*adv)[1], ElementsAre(DoubleNear(-0.03, kTol), DoubleNear(0.1, kTol)));
  EXPECT_THAT((*adv)[2], ElementsAre(DoubleNear(0.42, kTol)));
}

TEST(TurnAdvantagesTest, TheGroupMeanIncludesTheTrajectoryItselfAndShrinksByNMinusOneOverN) {
  absl::StatusOr<std::vector<std::vector<double>>> adv =
      TurnAdvantages(kGroup, {.gamma = 0.4, .baseline = TurnBaseline::kGroupMean});
  ASSERT_TRUE(adv.ok()) << adv.status();
  // Turn 0: mean 2.16/3 = 0.72: A -0.26, B -0.02, C 0.28 (2/3 of the
  // leave-one-out values). Turn 1: mean 0.95: A -0.05, B 0.05 (1/2 of them).
  EXPECT_THAT((*adv)[0], ElementsAre(DoubleNear(-0.26, kTol), DoubleNear(-0.05, kTol), 0.0));
  EXPECT_THAT((*adv)[1], ElementsAre(DoubleNear(-0.02, kTol), DoubleNear(0.05, kTol)));
  EXPECT_THAT((*adv)[2], ElementsAre(DoubleNear(0.28, kTol)));
}

TEST(TurnAdvantagesTest, GammaZeroCreditsEachTurnAlone) {
  absl::StatusOr<std::vector<std::vector<double>>> adv =
      TurnAdvantages({{0.0, 1.0}, {0.5, 0.5}}, {.gamma = 0, .baseline = TurnBaseline::kLeaveOneOut});
  ASSERT_TRUE(adv.ok()) << adv.status();
  EXPECT_THAT((*adv)[0], ElementsAre(DoubleNear(-0.5, kTol), DoubleNear(0.5, kTol)));
  EXPECT_THAT((*adv)[1], ElementsAre(DoubleNear(0.5, kTol), DoubleNear(-0.5, kTol)));
}

TEST(TurnAdvantagesTest, ATrajectoryAloneHasNothingToBeComparedWith) {
  absl::StatusOr<std::vector<std::vector<double>>> adv =
      TurnAdvantages({{0.2, 0.9}}, {.gamma = 0.4, .baseline = TurnBaseline::kGroupMean});
  ASSERT_TRUE(adv.ok()) << adv.status();
  EXPECT_THAT((*adv)[0], ElementsAre(0.0, 0.0));
}

TEST(TurnAdvantagesTest, BadInputIsRefusedNamingTheProblem) {
  EXPECT_THAT(TurnAdvantages(kGroup, {.gamma = 1.5}).status().message(), HasSubstr("gamma 1.5"));
  EXPECT_THAT(TurnAdvantages({{0.1}, {}}, {.gamma = 0.4}).status().message(),
              HasSubstr("trajectory 1 has no turn"));
  EXPECT_THAT(TurnAdvantages({{0.1, std::nan("")}}, {.gamma = 0.4}).status().message(),
              HasSubstr("trajectory 0 turn 1"));
}

TEST(BestTurnTest, TheHighestRewardAndTheEarliestOfEquals) {
  EXPECT_EQ(BestTurn({0.1, 0.5, 1.0}), 2);
  EXPECT_EQ(BestTurn({1.0, 0.2, 1.0}), 0);
  EXPECT_EQ(BestTurn({}), -1);
}

}  // namespace
}  // namespace kforge
