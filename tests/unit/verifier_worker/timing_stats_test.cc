// Timing statistics: the trimmed mean, median and spread of trials, and the
// side-stream check's judgement of the host clock's lead, and the
// fresh-input flag's judgement of a fresh call's time. (How many
// trials a side gets is the harness's budget: timing.Budget, tested in
// tests/unit/verifier_worker/harness/test_launch_record.py.)
#include "verifier_worker/funnel/timing_stats.h"

#include <set>
#include <utility>
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

// A timing of `trials` trials whose events read `event_ms` and host clock
// `host_ms` (means).
v1::Timing Timed(double event_ms, double host_ms, int trials = 50) {
  v1::Timing t;
  t.set_trials(trials);
  t.set_mean_ms(event_ms);
  t.set_median_ms(event_ms);
  t.set_host_mean_ms(host_ms);
  return t;
}

class JudgeHostGapTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(ApplyProtoDefaults(&protocol_).ok()); }
  v1::TimingProtocol protocol_;
  // The eager baseline as cached, timed on a quiet GPU.
  const v1::Timing cached_eager_ = Timed(0.075, 0.085);
};

TEST_F(JudgeHostGapTest, HiddenWorkOnAQuietGpuIsSuspected) {
  // 0.36 ms of work the events do not see; the reference's re-check, moments
  // before, leads by 0.01 ms as cached.
  const v1::Timing quiet_now = Timed(0.074, 0.084);
  const HostGapJudgement judged =
      JudgeHostGap(Timed(0.073, 0.4358), cached_eager_, &quiet_now, protocol_);
  EXPECT_TRUE(judged.suspected);
  EXPECT_NEAR(judged.lead_ms, 0.3628, 1e-9);
  EXPECT_NEAR(judged.reference_ms, 0.010, 1e-9);
  EXPECT_TRUE(JudgeHostGap(Timed(0.073, 0.4358), cached_eager_, nullptr, protocol_).suspected)
      << "without a re-check the cached reference's lead is the allowance";
}

TEST_F(JudgeHostGapTest, ALeadTheReferenceShowsAtTheSameMomentIsAllowed) {
  // Another process's kernels on the GPU: the reference's host clock leads
  // by 0.40 ms now, and an honest 0.073 ms kernel's by about as much.
  const v1::Timing busy_now = Timed(0.076, 0.476);
  const HostGapJudgement judged =
      JudgeHostGap(Timed(0.073, 0.4358), cached_eager_, &busy_now, protocol_);
  EXPECT_FALSE(judged.suspected) << "lead " << judged.lead_ms << " ms";
  EXPECT_NEAR(judged.reference_ms, 0.400, 1e-9);
  protocol_.set_host_gap_from_recheck(false);
  EXPECT_TRUE(JudgeHostGap(Timed(0.073, 0.4358), cached_eager_, &busy_now, protocol_).suspected)
      << "off: only the cached reference's lead is allowed";
}

TEST_F(JudgeHostGapTest, HiddenWorkBeyondTheReferencesLeadIsStillSuspected) {
  const v1::Timing busy_now = Timed(0.076, 0.476);
  EXPECT_TRUE(JudgeHostGap(Timed(0.073, 1.2), cached_eager_, &busy_now, protocol_).suspected);
  // A re-check that leads by less than the cache does not lower the
  // allowance.
  const v1::Timing faster_now = Timed(0.075, 0.075);
  EXPECT_NEAR(JudgeHostGap(Timed(0.073, 0.1), cached_eager_, &faster_now, protocol_).reference_ms,
              0.010, 1e-9);
}

TEST_F(JudgeHostGapTest, ALeadSmallBesideTheKernelsOwnTimeIsNotSuspected) {
  // 0.3 ms over a 2 ms kernel: below host_event_ratio_flag (1.5x).
  EXPECT_FALSE(JudgeHostGap(Timed(2.0, 2.3), cached_eager_, nullptr, protocol_).suspected);
  // No trials, no lead.
  EXPECT_FALSE(JudgeHostGap(v1::Timing(), cached_eager_, nullptr, protocol_).suspected);
}

TEST(ReferenceBusierNowTest, ARecheckLeadingItsEventsBeyondTheCachedLeadMarksABusyMoment) {
  const v1::Timing cached = Timed(0.075, 0.085);  // leads by 0.01 ms
  EXPECT_TRUE(ReferenceBusierNow(cached, Timed(0.076, 2.39)))
      << "beside a matmul loop on an H100 the re-check led by 2.31 ms";
  EXPECT_FALSE(ReferenceBusierNow(cached, Timed(0.074, 0.12))) << "within the 0.05 ms margin";
  EXPECT_FALSE(ReferenceBusierNow(cached, Timed(0.300, 0.310)))
      << "slower events alone are drift, which re-measures the baselines";
  EXPECT_FALSE(ReferenceBusierNow(v1::Timing(), Timed(0.076, 2.39))) << "nothing cached";
  EXPECT_FALSE(ReferenceBusierNow(cached, v1::Timing())) << "no re-check";
}

TEST(SpeedupOverFasterBaselineTest, JudgesTheSpeedupOverWhatTorchCompileReached) {
  // Eager LayerNorm 1.07 ms, compile 0.039 ms, candidate 0.027 ms.
  EXPECT_NEAR(SpeedupOverFasterBaseline(1.07 / 0.027, 0.039 / 0.027), 1.44, 0.01);
  // Compile slower than eager (it happens): eager is the faster baseline.
  EXPECT_DOUBLE_EQ(SpeedupOverFasterBaseline(3.0, 5.0), 3.0);
  // Compile not timed.
  EXPECT_DOUBLE_EQ(SpeedupOverFasterBaseline(12.0, 0.0), 12.0);
}

class JudgeFreshTimesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ApplyProtoDefaults(&protocol_).ok());
    ASSERT_EQ(protocol_.fresh_input_ratio_flag(), 2);
    ASSERT_EQ(protocol_.fresh_input_neighbours(), 8);
  }
  // 40 trials of 0.05 ms, with the ones listed slower.
  static std::vector<double> Trials(const std::set<int>& slow, double slow_ms) {
    std::vector<double> ms(40, 0.05);
    for (int i : slow) ms[i] = slow_ms;
    return ms;
  }
  v1::TimingProtocol protocol_;
};

TEST_F(JudgeFreshTimesTest, ACachesMissAmongFastHitsIsFlagged) {
  // Fresh calls at 10 and 30, recorded ones at 5 and 20: trials all 0.05 ms.
  const FreshCallJudgement j = JudgeFreshTimes({{10, 0.21}, {30, 0.23}}, Trials({}, 0),
                                               {5, 10, 20, 30}, 0.05, protocol_);
  EXPECT_TRUE(j.flagged);
  EXPECT_DOUBLE_EQ(j.fresh_ms, 0.21) << "the call closest to passing is reported";
  EXPECT_DOUBLE_EQ(j.neighbours_ms, 0.05);
  EXPECT_DOUBLE_EQ(j.compared_ms, 0.05);
}

TEST_F(JudgeFreshTimesTest, AStretchOfContentionThatSlowedTheTrialsBeforeEachFreshCallIsNot) {
  // Trials 2..8 (calls 2..9 but the recorded 5) and 22..27 ran at 0.2 ms:
  // another process's kernels on the GPU. The fresh calls at 11 and 31
  // came at the end of each stretch (the last trial before the first, 9,
  // was fast again).
  std::set<int> slow;
  for (int t = 2; t <= 8; ++t) slow.insert(t);
  for (int t = 22; t <= 27; ++t) slow.insert(t);
  const std::vector<double> trials = Trials(slow, 0.2);
  const std::set<int> untimed = {5, 11, 20, 31};
  FreshCallJudgement j = JudgeFreshTimes({{11, 0.22}, {31, 0.23}}, trials, untimed,
                                         Median(trials), protocol_);
  EXPECT_FALSE(j.flagged) << j.fresh_ms << " against " << j.compared_ms;
  EXPECT_DOUBLE_EQ(j.neighbours_ms, 0.2);

  // Without the neighbours, the trials' median alone flags them.
  protocol_.set_fresh_input_neighbours(0);
  j = JudgeFreshTimes({{11, 0.22}, {31, 0.23}}, trials, untimed, Median(trials), protocol_);
  EXPECT_TRUE(j.flagged);
  EXPECT_DOUBLE_EQ(j.neighbours_ms, 0);
}

TEST_F(JudgeFreshTimesTest, CallsLateNowAndThenOnALoadedNodeAreNot) {
  // Every fourth trial 0.2 ms (a busy host late to launch): the median is
  // 0.05 ms, and the fresh calls, late too, read 4x it.
  std::set<int> late;
  for (int t = 0; t < 40; t += 4) late.insert(t);
  const std::vector<double> trials = Trials(late, 0.2);
  const FreshCallJudgement j = JudgeFreshTimes({{14, 0.21}, {33, 0.2}}, trials, {14, 33},
                                               Median(trials), protocol_);
  EXPECT_FALSE(j.flagged) << j.fresh_ms << " against " << j.compared_ms;
  EXPECT_DOUBLE_EQ(j.neighbours_ms, 0.2);
}

TEST_F(JudgeFreshTimesTest, OnlyTheTrialsBeforeAFreshCallSpeakForIt) {
  // A candidate slow right after a miss (the trials after call 10) does
  // not excuse the miss: it could not have known the call was coming.
  std::set<int> after;
  for (int t = 10; t <= 17; ++t) after.insert(t);
  const FreshCallJudgement j =
      JudgeFreshTimes({{10, 0.21}}, Trials(after, 0.5), {10}, 0.05, protocol_);
  EXPECT_TRUE(j.flagged);
  EXPECT_DOUBLE_EQ(j.neighbours_ms, 0.05);
}

TEST_F(JudgeFreshTimesTest, OneFreshCallInItsTrialsConditionsClearsTheFlag) {
  // One miss stands out, the other does not: an honest kernel slowed once.
  EXPECT_FALSE(
      JudgeFreshTimes({{10, 0.3}, {30, 0.06}}, Trials({}, 0), {10, 30}, 0.05, protocol_).flagged);
}

TEST_F(JudgeFreshTimesTest, AFreshCallBeforeAnyTrialIsComparedWithTheMedianAndTheFloor) {
  FreshCallJudgement j = JudgeFreshTimes({{0, 0.21}}, Trials({}, 0), {0}, 0.05, protocol_);
  EXPECT_TRUE(j.flagged);
  EXPECT_DOUBLE_EQ(j.neighbours_ms, 0);
  // A microsecond kernel's is launch noise: compared with the floor.
  j = JudgeFreshTimes({{0, 0.009}}, std::vector<double>(40, 0.002), {0}, 0.002, protocol_);
  EXPECT_FALSE(j.flagged);
  EXPECT_DOUBLE_EQ(j.compared_ms, protocol_.fresh_input_floor_ms());
  EXPECT_FALSE(JudgeFreshTimes({}, Trials({}, 0), {}, 0.05, protocol_).flagged) << "none sent";
}

}  // namespace
}  // namespace kforge
