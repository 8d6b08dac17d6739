// StepTimer: a step's stage times from hand-made sample stamps and the
// durations the trainer measured; no clock is read.
#include "learner/timing/step_timer.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

// A scored sample generated over [gen_start, gen_end] and verified over
// [verify_start, verify_end], in seconds after an arbitrary epoch.
v1::ScoredSample Scored(double gen_start, double gen_end, double verify_start, double verify_end,
                        int tokens) {
  constexpr int64_t kEpochUs = 1'700'000'000'000'000;
  auto us = [](double s) { return kEpochUs + static_cast<int64_t>(s * 1e6); };
  v1::ScoredSample scored;
  v1::Sample* sample = scored.mutable_sample();
  sample->set_started_at_us(us(gen_start));
  sample->set_finished_at_us(us(gen_end));
  for (int i = 0; i < tokens; ++i) sample->add_completion_tokens(i);
  scored.mutable_verdict()->set_started_at_us(us(verify_start));
  scored.mutable_verdict()->set_finished_at_us(us(verify_end));
  return scored;
}

TEST(StepTimerTest, RolloutAndVerificationAreSpansOverTheStepsSamples) {
  StepTimer timer;
  // Two workers generating at once, each sample verified after it finished.
  timer.AddSample(Scored(10, 14, 14, 15, 100));
  timer.AddSample(Scored(11, 16, 16, 18, 300));
  timer.AddSample(Scored(12, 13, 13.5, 14, 100));
  const v1::StepTimes times = timer.Finish(absl::Seconds(10));
  EXPECT_DOUBLE_EQ(times.rollout_seconds(), 6);  // 10 .. 16
  EXPECT_EQ(times.generated_tokens(), 500);
  EXPECT_DOUBLE_EQ(times.rollout_tokens_per_second(), 500.0 / 6);
  EXPECT_DOUBLE_EQ(times.verify_seconds(), 4.5);  // 13.5 .. 18
  EXPECT_EQ(times.candidates_verified(), 3);
  EXPECT_DOUBLE_EQ(times.verify_candidates_per_second(), 3 / 4.5);
  EXPECT_EQ(times.samples(), 3);
  EXPECT_EQ(times.samples_timed(), 3);
  EXPECT_DOUBLE_EQ(times.step_seconds(), 10);
}

TEST(StepTimerTest, ACandidatesWaitForAVerifierIsItsOwnFigure) {
  StepTimer timer;
  timer.AddSample(Scored(10, 14, 14, 15, 100));    // verified at once
  timer.AddSample(Scored(11, 16, 22, 23, 100));    // 6 s behind other work
  timer.AddSample(Scored(12, 13, 12.5, 14, 100));  // a verifier clock 0.5 s behind: 0
  const v1::StepTimes times = timer.Finish(absl::Seconds(20));
  EXPECT_DOUBLE_EQ(times.verify_queue_mean_seconds(), 2);
  EXPECT_DOUBLE_EQ(times.verify_queue_max_seconds(), 6);
  // The span still starts at the first verification.
  EXPECT_DOUBLE_EQ(times.verify_seconds(), 10.5);  // 12.5 .. 23
}

TEST(StepTimerTest, LearnerDurationsAddUpAndGiveTrainingThroughput) {
  StepTimer timer;
  timer.AddWait(absl::Seconds(2));
  timer.AddWait(absl::Milliseconds(500));
  timer.AddTraining(absl::Seconds(4), 2000);  // two epochs of 1000 tokens
  timer.AddWeightSync(absl::Milliseconds(250));
  const v1::StepTimes times = timer.Finish(absl::Seconds(7));
  EXPECT_DOUBLE_EQ(times.learner_wait_seconds(), 2.5);
  EXPECT_DOUBLE_EQ(times.train_seconds(), 4);
  EXPECT_EQ(times.trained_tokens(), 2000);
  EXPECT_DOUBLE_EQ(times.train_tokens_per_second(), 500);
  EXPECT_DOUBLE_EQ(times.weight_sync_seconds(), 0.25);
  EXPECT_DOUBLE_EQ(times.step_seconds(), 7);
}

TEST(StepTimerTest, SamplesWithoutStampsCountButDoNotStretchTheSpans) {
  StepTimer timer;
  timer.AddSample(Scored(20, 22, 22, 23, 10));
  v1::ScoredSample old_worker;  // no stamps at all (a worker before the fields)
  old_worker.mutable_sample()->add_completion_tokens(7);
  timer.AddSample(old_worker);
  // Answered by a dispatcher, not a verifier: no verification stamps.
  v1::ScoredSample local = Scored(21, 23, 0, 0, 10);
  local.mutable_verdict()->clear_started_at_us();
  local.mutable_verdict()->clear_finished_at_us();
  timer.AddSample(local);
  // A clock that stepped back: finished before it started.
  timer.AddSample(Scored(30, 5, 40, 39, 10));
  const v1::StepTimes times = timer.Finish(absl::Seconds(5));
  EXPECT_EQ(times.samples(), 4);
  EXPECT_EQ(times.samples_timed(), 2);
  EXPECT_DOUBLE_EQ(times.rollout_seconds(), 3);  // 20 .. 23
  EXPECT_EQ(times.generated_tokens(), 20);
  EXPECT_EQ(times.candidates_verified(), 1);
  EXPECT_DOUBLE_EQ(times.verify_seconds(), 1);
}

TEST(StepTimerTest, AnEmptyStepHasNoThroughputRatherThanInfinity) {
  const v1::StepTimes times = StepTimer().Finish(absl::Seconds(1));
  EXPECT_EQ(times.rollout_seconds(), 0);
  EXPECT_EQ(times.rollout_tokens_per_second(), 0);
  EXPECT_EQ(times.verify_candidates_per_second(), 0);
  EXPECT_EQ(times.train_tokens_per_second(), 0);
  EXPECT_EQ(times.samples(), 0);
}

}  // namespace
}  // namespace kforge
