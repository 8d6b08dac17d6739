// WarmUpRound: a job's verifier warm-ups are counted per task once, and
// their summary says which reference solutions this hardware's verifiers
// accept, how fast, and why the others failed.
#include "learner/rollout/warm_up_round.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

CompletedGroup WarmUp(const std::string& task, bool correct, double speedup,
                      v1::Stage failed_at = v1::STAGE_UNSPECIFIED, const std::string& why = "") {
  CompletedGroup group;
  group.item.set_warm_up(true);
  group.item.mutable_task()->set_id(task);
  v1::Verdict* verdict = group.samples.emplace_back().mutable_verdict();
  verdict->set_correct(correct);
  verdict->set_speedup_vs_eager(speedup);
  if (failed_at != v1::STAGE_UNSPECIFIED) {
    v1::StageResult* passed = verdict->add_stages();
    passed->set_stage(v1::STAGE_STATIC);
    passed->set_outcome(v1::OUTCOME_PASSED);
    v1::StageResult* failed = verdict->add_stages();
    failed->set_stage(failed_at);
    failed->set_outcome(v1::OUTCOME_FAILED);
    failed->set_message(why);
  }
  return group;
}

TEST(WarmUpRoundTest, EachTaskCountsOnceAndTheRoundCompletesWhenAllAreBack) {
  WarmUpRound round;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  round.Open({"a", "b"}, t0);
  EXPECT_FALSE(round.complete());
  EXPECT_TRUE(round.Take(WarmUp("a", true, 1.0), t0 + absl::Seconds(2)));
  EXPECT_FALSE(round.Take(WarmUp("a", true, 1.0), t0 + absl::Seconds(3))) << "back twice";
  EXPECT_FALSE(round.Take(WarmUp("z", true, 1.0), t0 + absl::Seconds(3))) << "no such task out";
  EXPECT_FALSE(round.complete());
  EXPECT_TRUE(round.Take(WarmUp("b", true, 1.0), t0 + absl::Seconds(5)));
  EXPECT_TRUE(round.complete());
}

TEST(WarmUpRoundTest, TheSummaryCountsTheCorrectOnesAndSaysWhyTheOthersFailed) {
  WarmUpRound round;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  round.Open({"level1/19_ReLU", "level1/26_GELU_", "level1/32_HardTanh"}, t0);
  round.Take(WarmUp("level1/19_ReLU", true, 0.9), t0 + absl::Seconds(4));
  round.Take(WarmUp("level1/26_GELU_", true, 1.2), t0 + absl::Milliseconds(23400));
  round.Take(WarmUp("level1/32_HardTanh", false, 0, v1::STAGE_TINY_RUN, "outputs differ"),
             t0 + absl::Seconds(9));
  const std::string summary = round.Summary();
  EXPECT_THAT(summary, HasSubstr("2 of 3 training tasks' reference solutions verified correct"));
  EXPECT_THAT(summary, HasSubstr("speedup over eager 0.90-1.20x"));
  EXPECT_THAT(summary, HasSubstr("all back 23.4 s after they went out"));
  EXPECT_THAT(summary, HasSubstr("not correct: level1/32_HardTanh (STAGE_TINY_RUN OUTCOME_FAILED: "
                                 "outputs differ)"));
}

TEST(WarmUpRoundTest, ASummaryBeforeAllAreBackSaysHowManyAreMissing) {
  WarmUpRound round;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  round.Open({"a", "b", "c"}, t0);
  round.Take(WarmUp("a", true, 1.5), t0 + absl::Seconds(1));
  const std::string summary = round.Summary();
  EXPECT_THAT(summary, HasSubstr("1 of 3 training tasks"));
  EXPECT_THAT(summary, HasSubstr("2 not back"));
  EXPECT_THAT(summary, HasSubstr("the last back 1.0 s"));
  EXPECT_THAT(summary, Not(HasSubstr("not correct")));
}

// What the job's end waits for: none before the round opened, then the
// tasks not back, each task once however often it was named.
TEST(WarmUpRoundTest, NotBackCountsEachTaskOnceAndNothingBeforeTheRoundOpened) {
  WarmUpRound round;
  EXPECT_EQ(round.not_back(), 0u);
  EXPECT_FALSE(round.outstanding());
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  round.Open({"a", "b", "a"}, t0);
  EXPECT_EQ(round.not_back(), 2u);
  round.Take(WarmUp("a", true, 1.0), t0 + absl::Seconds(1));
  EXPECT_EQ(round.not_back(), 1u);
  EXPECT_TRUE(round.outstanding());
  round.Take(WarmUp("b", true, 1.0), t0 + absl::Seconds(2));
  EXPECT_FALSE(round.outstanding());
  EXPECT_TRUE(round.complete());
  EXPECT_THAT(round.Summary(), HasSubstr("2 of 2 training tasks"));
}

}  // namespace
}  // namespace kforge
