// Timing statistics: the trimmed mean, median and spread of trials, and how
// many trials a side gets from the min_timed_ms budget.
#include "verifier_worker/funnel/timing_stats.h"

#include <vector>

#include <gtest/gtest.h>

#include "common/config/proto_defaults.h"

namespace kforge {
namespace {

v1::TimingProtocol Protocol(int trials, double min_timed_ms, int max_trials) {
  v1::TimingProtocol protocol;
  EXPECT_TRUE(ApplyProtoDefaults(&protocol).ok());
  protocol.set_trials(trials);
  protocol.set_min_timed_ms(min_timed_ms);
  protocol.set_max_trials(max_trials);
  return protocol;
}

TEST(TimingStatsTest, MedianTrimmedMeanAndSpread) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  // 10% off each end of ten values drops the 100 and the 0.
  EXPECT_DOUBLE_EQ(TrimmedMean({0, 1, 1, 1, 1, 1, 1, 1, 1, 100}, 0.1), 1);
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({2, 2, 2}), 0);
  EXPECT_NEAR(CoefficientOfVariation({1, 3}), 0.7071, 1e-4);  // sd sqrt(2), mean 2
}

TEST(TimingStatsTest, ShortKernelsGetTrialsUntilTheBudgetIsMeasured) {
  // 0.02 ms a trial, 100 ms wanted: 5000 trials, 10 done, 4 blocks left.
  const std::vector<double> first(10, 0.02);
  EXPECT_EQ(LaterBlockTrials(first, 4, Protocol(50, 100, 100000)), (5000 - 10 + 3) / 4);
  // max_trials caps it.
  EXPECT_EQ(LaterBlockTrials(first, 4, Protocol(50, 100, 1000)), (1000 - 10 + 3) / 4);
}

TEST(TimingStatsTest, LongKernelsKeepTheTrialCount) {
  // 5 ms a trial: 100 ms is 20 trials, fewer than the 50 asked for.
  const std::vector<double> first(10, 5.0);
  EXPECT_EQ(LaterBlockTrials(first, 4, Protocol(50, 100, 5000)), 10);
  // No budget: exactly `trials`.
  EXPECT_EQ(LaterBlockTrials(std::vector<double>(10, 0.001), 4, Protocol(50, 0, 5000)), 10);
}

TEST(TimingStatsTest, NothingLeftOrNoBlocksLeft) {
  const std::vector<double> first(60, 1.0);
  EXPECT_EQ(LaterBlockTrials(first, 4, Protocol(50, 10, 5000)), 0);
  EXPECT_EQ(LaterBlockTrials(first, 0, Protocol(50, 10, 5000)), 0);
  // No estimate (a side that returned nothing): `trials` stands.
  EXPECT_EQ(LaterBlockTrials({}, 5, Protocol(50, 100, 5000)), 10);
}

}  // namespace
}  // namespace kforge
