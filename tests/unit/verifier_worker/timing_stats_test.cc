// Timing statistics: the trimmed mean, median and spread of trials. (How many
// trials a side gets is the harness's budget: timing.Budget, tested in
// tests/unit/verifier_worker/harness/test_launch_record.py.)
#include "verifier_worker/funnel/timing_stats.h"

#include <vector>

#include <gtest/gtest.h>

#include "common/config/proto_defaults.h"

namespace kforge {
namespace {

TEST(TimingStatsTest, MedianTrimmedMeanAndSpread) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  // 10% off each end of ten values drops the 100 and the 0.
  EXPECT_DOUBLE_EQ(TrimmedMean({0, 1, 1, 1, 1, 1, 1, 1, 1, 100}, 0.1), 1);
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({2, 2, 2}), 0);
  EXPECT_NEAR(CoefficientOfVariation({1, 3}), 0.7071, 1e-4);  // sd sqrt(2), mean 2
}

TEST(TimingStatsTest, SummaryUsesTheProtocolsTrimAndKeepsHostTimes) {
  v1::TimingProtocol protocol;
  ASSERT_TRUE(ApplyProtoDefaults(&protocol).ok());
  const v1::Timing t = SummarizeTiming({0, 1, 1, 1, 1, 1, 1, 1, 1, 100}, std::vector<double>(10, 2),
                                       protocol);
  EXPECT_EQ(t.trials(), 10);
  EXPECT_DOUBLE_EQ(t.mean_ms(), 1);  // trim_fraction 0.1
  EXPECT_DOUBLE_EQ(t.median_ms(), 1);
  EXPECT_DOUBLE_EQ(t.min_ms(), 0);
  EXPECT_DOUBLE_EQ(t.host_mean_ms(), 2);
  EXPECT_DOUBLE_EQ(Representative(t, protocol), 1);
}

TEST(SpeedupOverFasterBaselineTest, JudgesTheSpeedupOverWhatTorchCompileReached) {
  // Eager LayerNorm 1.07 ms, compile 0.039 ms, candidate 0.027 ms.
  EXPECT_NEAR(SpeedupOverFasterBaseline(1.07 / 0.027, 0.039 / 0.027), 1.44, 0.01);
  // Compile slower than eager (it happens): eager is the faster baseline.
  EXPECT_DOUBLE_EQ(SpeedupOverFasterBaseline(3.0, 5.0), 3.0);
  // Compile not timed.
  EXPECT_DOUBLE_EQ(SpeedupOverFasterBaseline(12.0, 0.0), 12.0);
}

}  // namespace
}  // namespace kforge
