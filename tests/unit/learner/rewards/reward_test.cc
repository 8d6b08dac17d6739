// Rewards from verdicts under the default RewardSpec (fail_static 0,
// fail_compile 0.3, fail_tiny_run 0.5, fail_multi_input 0.7, correct 1,
// speedup_weight 0.5 with log clamped to [-1, 2], format_weight 0.1,
// similarity_weight 0, hack_penalty 0), checked against hand-computed values.
#include "learner/rewards/reward.h"

#include <cmath>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/config/proto_defaults.h"
#include "learner/rewards/sequence_matcher.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

constexpr char kCode[] = "class ModelNew:\n    pass\n";
// Format score 1 with reasoning tags: the format term is 0.1.
const std::string kCompletion =
    absl::StrCat("<think>plan</think>\n<answer>\n```python\n", kCode, "```\n</answer>");

v1::RewardSpec Spec() {
  v1::RewardSpec spec;
  EXPECT_TRUE(ApplyProtoDefaults(&spec).ok());
  return spec;
}

// Stages before `stage` pass, `stage` ends with `outcome`, later ones are
// skipped.
v1::Verdict StopAt(v1::Stage stage, v1::StageOutcome outcome) {
  v1::Verdict verdict;
  for (int s = v1::STAGE_STATIC; s <= v1::STAGE_TIMING; ++s) {
    v1::StageResult* result = verdict.add_stages();
    result->set_stage(static_cast<v1::Stage>(s));
    result->set_outcome(s < stage    ? v1::OUTCOME_PASSED
                        : s == stage ? outcome
                                     : v1::OUTCOME_SKIPPED);
  }
  verdict.set_stage_reached(stage);
  verdict.set_extracted_code(kCode);
  return verdict;
}

v1::Verdict Correct(double speedup) {
  v1::Verdict verdict = StopAt(v1::STAGE_TIMING, v1::OUTCOME_PASSED);
  verdict.set_correct(true);
  verdict.set_speedup_vs_eager(speedup);
  return verdict;
}

RewardBreakdown Reward(const v1::Verdict& verdict, const v1::RewardSpec& spec = Spec()) {
  return ComputeReward(spec, verdict, kCompletion, /*reference_solution=*/"",
                       /*reasoning_tags=*/true);
}

TEST(RewardTest, EachFailedStageGivesItsPartialCreditPlusFormat) {
  const std::pair<v1::Stage, double> stages[] = {{v1::STAGE_STATIC, 0.0},
                                                 {v1::STAGE_COMPILE, 0.3},
                                                 {v1::STAGE_TINY_RUN, 0.5},
                                                 {v1::STAGE_MULTI_INPUT, 0.7}};
  for (const auto& [stage, credit] : stages) {
    for (v1::StageOutcome outcome :
         {v1::OUTCOME_FAILED, v1::OUTCOME_TIMED_OUT, v1::OUTCOME_CRASHED}) {
      const RewardBreakdown r = Reward(StopAt(stage, outcome));
      EXPECT_TRUE(r.usable);
      EXPECT_DOUBLE_EQ(r.stage, credit) << v1::Stage_Name(stage);
      EXPECT_DOUBLE_EQ(r.format, 0.1);
      EXPECT_EQ(r.speedup, 0.0);
      EXPECT_DOUBLE_EQ(r.total, credit + 0.1) << v1::Stage_Name(stage);
    }
  }
  EXPECT_EQ(Reward(StopAt(v1::STAGE_COMPILE, v1::OUTCOME_FAILED)).explanation,
            "failed compile: 0.3 + format 0.1");
}

TEST(RewardTest, CorrectWithSpeedupAddsTheWeightedLogSpeedup) {
  const RewardBreakdown r = Reward(Correct(2.0));
  EXPECT_DOUBLE_EQ(r.stage, 1.0);
  EXPECT_DOUBLE_EQ(r.speedup, 0.5 * std::log(2.0));
  EXPECT_DOUBLE_EQ(r.total, 1.0 + 0.5 * std::log(2.0) + 0.1);
  EXPECT_EQ(r.explanation, "correct: 1 + speedup 0.346574 (2x) + format 0.1");
  // Slower than eager: a negative term.
  EXPECT_DOUBLE_EQ(Reward(Correct(0.5)).speedup, 0.5 * std::log(0.5));
}

TEST(RewardTest, LogSpeedupIsClampedAtBothEnds) {
  EXPECT_DOUBLE_EQ(Reward(Correct(100.0)).speedup, 0.5 * 2.0);  // log 100 = 4.6 > 2
  EXPECT_DOUBLE_EQ(Reward(Correct(0.1)).speedup, 0.5 * -1.0);   // log 0.1 = -2.3 < -1
  v1::RewardSpec spec = Spec();
  spec.set_speedup_log_max(3.0);
  EXPECT_DOUBLE_EQ(Reward(Correct(100.0), spec).speedup, 0.5 * 3.0);
}

TEST(RewardTest, CorrectWithoutATimedSpeedupHasNoSpeedupTerm) {
  v1::Verdict timing_failed = StopAt(v1::STAGE_TIMING, v1::OUTCOME_TIMED_OUT);
  timing_failed.set_correct(true);
  timing_failed.set_speedup_vs_eager(3.0);  // not believed: the timing stage did not pass
  const RewardBreakdown r = Reward(timing_failed);
  EXPECT_TRUE(r.usable);
  EXPECT_DOUBLE_EQ(r.stage, 1.0);
  EXPECT_EQ(r.speedup, 0.0);
  EXPECT_DOUBLE_EQ(r.total, 1.1);
  EXPECT_EQ(Reward(Correct(0.0)).speedup, 0.0);  // not timed
}

TEST(RewardTest, ImplausibleSpeedupWithholdsOnlyTheSpeedupTerm) {
  v1::Verdict verdict = Correct(50.0);
  verdict.add_hack_flags(v1::HACK_SPEEDUP_IMPLAUSIBLE);
  const RewardBreakdown r = Reward(verdict);
  EXPECT_FALSE(r.hacked);
  EXPECT_EQ(r.speedup, 0.0);
  EXPECT_DOUBLE_EQ(r.total, 1.1);
  EXPECT_THAT(r.explanation, HasSubstr("speedup withheld: HACK_SPEEDUP_IMPLAUSIBLE"));
}

TEST(RewardTest, AnyOtherHackFlagGivesThePenaltyAndNothingElse) {
  v1::RewardSpec spec = Spec();
  spec.set_hack_penalty(-1.0);
  v1::Verdict verdict = Correct(2.0);
  verdict.add_hack_flags(v1::HACK_SPEEDUP_IMPLAUSIBLE);
  verdict.add_hack_flags(v1::HACK_TORCH_FALLBACK);
  const RewardBreakdown r = Reward(verdict, spec);
  EXPECT_TRUE(r.usable);
  EXPECT_TRUE(r.hacked);
  EXPECT_EQ(r.total, -1.0);
  EXPECT_EQ(r.reasoning, -1.0);
  EXPECT_EQ(r.code, -1.0);
  EXPECT_EQ(r.stage + r.speedup + r.format + r.similarity, 0.0);
  EXPECT_EQ(r.explanation, "hacked (HACK_TORCH_FALLBACK): penalty -1");
  // The default penalty is 0, also for a failed candidate.
  v1::Verdict failed = StopAt(v1::STAGE_STATIC, v1::OUTCOME_FAILED);
  failed.add_hack_flags(v1::HACK_SUBPROCESS);
  EXPECT_EQ(Reward(failed).total, 0.0);
  EXPECT_TRUE(Reward(failed).hacked);
}

TEST(RewardTest, VerifierInternalErrorIsUnusable) {
  v1::Verdict verdict = StopAt(v1::STAGE_COMPILE, v1::OUTCOME_INTERNAL_ERROR);
  verdict.mutable_stages(1)->set_message("sandbox setup failed");
  verdict.add_hack_flags(v1::HACK_TORCH_FALLBACK);  // not trusted either
  const RewardBreakdown r = Reward(verdict);
  EXPECT_FALSE(r.usable);
  EXPECT_FALSE(r.hacked);
  EXPECT_EQ(r.total, 0.0);
  EXPECT_EQ(r.explanation, "unusable: internal error at STAGE_COMPILE: sandbox setup failed");
}

TEST(RewardTest, VerdictWithoutStagesOrWithoutAFailedStageIsUnusable) {
  EXPECT_FALSE(Reward(v1::Verdict()).usable);
  EXPECT_EQ(Reward(v1::Verdict()).explanation, "unusable: no stages");
  v1::Verdict inconsistent = StopAt(v1::STAGE_TIMING, v1::OUTCOME_PASSED);  // correct unset
  EXPECT_FALSE(Reward(inconsistent).usable);
}

TEST(RewardTest, FormatTermFollowsTheFormatScore) {
  const v1::Verdict verdict = StopAt(v1::STAGE_STATIC, v1::OUTCOME_FAILED);
  const std::string half = absl::StrCat("<answer>\n```python\n", kCode, "```\n</answer>");
  EXPECT_DOUBLE_EQ(ComputeReward(Spec(), verdict, half, "", true).format, 0.05);
  EXPECT_EQ(ComputeReward(Spec(), verdict, kCode, "", true).format, 0.0);
  const std::string plain = absl::StrCat("```python\n", kCode, "```\n");
  EXPECT_DOUBLE_EQ(ComputeReward(Spec(), verdict, plain, "", false).format, 0.1);
  EXPECT_EQ(ComputeReward(Spec(), verdict, plain, "", false).explanation,
            "failed static: 0 + format 0.1");
}

TEST(RewardTest, SimilarityComparesTheExtractedCodeWithTheReference) {
  v1::RewardSpec spec = Spec();
  spec.set_similarity_weight(0.5);
  const std::string reference = "class ModelNew:\n    def forward(self, x):\n        return x\n";
  v1::Verdict verdict = StopAt(v1::STAGE_COMPILE, v1::OUTCOME_FAILED);
  RewardBreakdown r = ComputeReward(spec, verdict, kCompletion, reference, true);
  EXPECT_DOUBLE_EQ(r.similarity, 0.5 * SequenceMatcherRatio(kCode, reference));
  EXPECT_GT(r.similarity, 0.0);
  EXPECT_DOUBLE_EQ(r.total, 0.3 + 0.1 + r.similarity);
  // Nothing extracted: the completion stands in.
  verdict.clear_extracted_code();
  r = ComputeReward(spec, verdict, kCompletion, reference, true);
  EXPECT_DOUBLE_EQ(r.similarity, 0.5 * SequenceMatcherRatio(kCompletion, reference));
  // Off without a reference or without weight.
  EXPECT_EQ(ComputeReward(spec, verdict, kCompletion, "", true).similarity, 0.0);
  EXPECT_EQ(ComputeReward(Spec(), verdict, kCompletion, reference, true).similarity, 0.0);
}

TEST(RewardTest, HierarchicalSplitJudgesCodeWithoutSpeedupAndReasoningByTheTotal) {
  v1::RewardSpec spec = Spec();
  spec.set_similarity_weight(0.2);
  const RewardBreakdown r = ComputeReward(spec, Correct(2.0), kCompletion, kCode, true);
  EXPECT_DOUBLE_EQ(r.similarity, 0.2);  // the extracted code is the reference
  EXPECT_DOUBLE_EQ(r.code, 1.0 + 0.1 + 0.2);
  EXPECT_DOUBLE_EQ(r.reasoning, r.total);
  EXPECT_DOUBLE_EQ(r.total, 1.0 + 0.5 * std::log(2.0) + 0.1 + 0.2);
}

}  // namespace
}  // namespace kforge
