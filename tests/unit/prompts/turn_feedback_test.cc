// Turn feedback: what the policy is told about its last attempt names the
// stage, the error and the measured times, and never the verifier's
// secrets (reference values, seeds, sandbox paths, ids).
#include "prompts/turn_feedback.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Verdict Failed(v1::Stage stage, v1::StageOutcome outcome, const std::string& message) {
  v1::Verdict verdict;
  verdict.set_stage_reached(stage);
  for (int s = v1::STAGE_STATIC; s < stage; ++s) {
    v1::StageResult* passed = verdict.add_stages();
    passed->set_stage(static_cast<v1::Stage>(s));
    passed->set_outcome(v1::OUTCOME_PASSED);
  }
  v1::StageResult* last = verdict.add_stages();
  last->set_stage(stage);
  last->set_outcome(outcome);
  last->set_message(message);
  return verdict;
}

TEST(TurnFeedbackTest, ACorrectAnswerIsToldItsTimesAgainstTheBaselines) {
  v1::Verdict verdict;
  verdict.set_correct(true);
  verdict.set_stage_reached(v1::STAGE_TIMING);
  verdict.mutable_candidate_timing()->set_mean_ms(0.0512);
  verdict.mutable_eager_timing()->set_mean_ms(0.0716);
  verdict.mutable_compile_timing()->set_mean_ms(0.049);
  verdict.set_speedup_vs_eager(1.398);
  verdict.set_speedup_vs_compile(0.957);
  const std::string text = RenderTurnFeedback(verdict, 1500);
  EXPECT_THAT(text, HasSubstr("passed every correctness check"));
  EXPECT_THAT(text, HasSubstr("0.0512 ms per call; PyTorch eager 0.0716 ms (1.40x)"));
  EXPECT_THAT(text, HasSubstr("torch.compile 0.049 ms (0.96x)"));
  EXPECT_THAT(text, HasSubstr("Make it faster"));
}

TEST(TurnFeedbackTest, AMismatchKeepsItsCountsAndErrorsAndHidesTheValues) {
  const v1::Verdict verdict = Failed(
      v1::STAGE_MULTI_INPUT, v1::OUTCOME_FAILED,
      "input set normal_seed_7: 12 of 4096 elements mismatch (atol 0.01, rtol 0.01); first at "
      "index 5 [0, 5]: candidate 1.5, reference 0.25; max abs error 1.25, rel l2 error 0.31");
  const std::string text = RenderTurnFeedback(verdict, 1500);
  EXPECT_THAT(text, HasSubstr("did not pass the correctness check on more inputs"));
  EXPECT_THAT(text, HasSubstr("12 of 4096 elements mismatch (atol 0.01, rtol 0.01)"));
  EXPECT_THAT(text, HasSubstr("candidate <hidden>, reference <hidden>"));
  EXPECT_THAT(text, HasSubstr("max abs error 1.25"));
  EXPECT_THAT(text, HasSubstr("normal_seed_<hidden>"));
  EXPECT_THAT(text, Not(HasSubstr("0.25")));
  EXPECT_THAT(text, Not(HasSubstr("1.5,")));
  EXPECT_THAT(text, Not(HasSubstr("seed_7")));
}

TEST(TurnFeedbackTest, SecretsOfEveryKindAreHidden) {
  const std::string scrubbed = ScrubVerifierMessage(
      "where the reference is nan; reference has -inf at index 3; Expected: 0.125; "
      "seed=123456, seeds: 99; epoch 3f9a0c44b1d2e7f80a1b; "
      "File \"/tmp/kforge-sandbox-81/work/candidate.py\", line 12, in forward; "
      "torch/nn/functional.py stays");
  EXPECT_THAT(scrubbed, HasSubstr("where the reference is <hidden>"));
  EXPECT_THAT(scrubbed, HasSubstr("reference has <hidden> at index 3"));
  EXPECT_THAT(scrubbed, HasSubstr("Expected: <hidden>"));
  EXPECT_THAT(scrubbed, HasSubstr("seed=<hidden>, seeds: <hidden>"));
  EXPECT_THAT(scrubbed, HasSubstr("epoch <id>"));
  EXPECT_THAT(scrubbed, HasSubstr("File \"candidate.py\", line 12, in forward"));
  EXPECT_THAT(scrubbed, HasSubstr("torch/nn/functional.py stays"));
  for (const char* secret : {"123456", "99", "0.125", "/tmp", "kforge-sandbox", "3f9a0c44"}) {
    EXPECT_THAT(scrubbed, Not(HasSubstr(secret))) << secret;
  }
}

TEST(TurnFeedbackTest, ALongTracebackKeepsItsEndWithinTheBudget) {
  std::string traceback = "Traceback (most recent call last):\n";
  for (int i = 0; i < 200; ++i) absl::StrAppend(&traceback, "  File \"x.py\", line ", i, ", in f\n");
  absl::StrAppend(&traceback, "NameError: name 'tl' is not defined");
  const std::string text =
      RenderTurnFeedback(Failed(v1::STAGE_COMPILE, v1::OUTCOME_FAILED, traceback), 400);
  EXPECT_LE(text.size(), 420u) << text;
  EXPECT_THAT(text, HasSubstr("did not pass import and compile"));
  EXPECT_THAT(text, HasSubstr("[...]"));
  EXPECT_THAT(text, HasSubstr("NameError: name 'tl' is not defined"));
}

TEST(TurnFeedbackTest, ACorrectAnswerWhoseTimingFailedIsToldSo) {
  v1::Verdict verdict = Failed(v1::STAGE_TIMING, v1::OUTCOME_TIMED_OUT, "timed run: no reply in 30 s");
  verdict.set_correct(true);
  const std::string text = RenderTurnFeedback(verdict, 500);
  EXPECT_THAT(text, HasSubstr("passed every correctness check"));
  EXPECT_THAT(text, HasSubstr("But timing did not finish: it ran past the time limit."));
  EXPECT_THAT(text, HasSubstr("timed run: no reply in 30 s"));
}

TEST(TurnFeedbackTest, ManyLongDetailsShareOneBudgetAndAHugeMessageIsCheap) {
  v1::Verdict flagged = Failed(v1::STAGE_MULTI_INPUT, v1::OUTCOME_FAILED, "");
  flagged.add_hack_flags(v1::HACK_TORCH_FALLBACK);
  for (int i = 0; i < 50; ++i) flagged.add_hack_details(std::string(300, 'a' + i % 26));
  EXPECT_LE(RenderTurnFeedback(flagged, 600).size(), 700u);
  // A candidate's own error text of megabytes, all hex: scrubbed and cut
  // without walking all of it.
  const std::string huge(4 << 20, 'f');
  const std::string text =
      RenderTurnFeedback(Failed(v1::STAGE_COMPILE, v1::OUTCOME_FAILED, huge), 400);
  EXPECT_LE(text.size(), 400u + 120u);
  EXPECT_THAT(text, HasSubstr("[...]"));
}

TEST(TurnFeedbackTest, TimeoutsFlagsAndMissingVerdictsReadDifferently) {
  EXPECT_THAT(RenderTurnFeedback(Failed(v1::STAGE_TINY_RUN, v1::OUTCOME_TIMED_OUT, ""), 500),
              HasSubstr("the first run, on small inputs: it ran past the time limit."));
  v1::Verdict flagged = Failed(v1::STAGE_MULTI_INPUT, v1::OUTCOME_FAILED, "");
  flagged.add_hack_flags(v1::HACK_TORCH_FALLBACK);
  flagged.add_hack_details("aten::relu ran 3 times (/opt/sandbox/run.py)");
  const std::string text = RenderTurnFeedback(flagged, 500);
  EXPECT_THAT(text, HasSubstr("earned no credit: the output was computed by PyTorch operations"));
  EXPECT_THAT(text, HasSubstr("aten::relu ran 3 times (run.py)"));
  EXPECT_THAT(RenderTurnFeedback(v1::Verdict(), 500), HasSubstr("could not be verified"));
}

TEST(TurnFeedbackTest, ATimingChecksMeasurementsAreNotShownButWhatToFixIs) {
  v1::Verdict flagged = Failed(v1::STAGE_TIMING, v1::OUTCOME_FAILED, "");
  flagged.set_correct(true);
  flagged.add_hack_flags(v1::HACK_RESULT_CACHING);
  flagged.add_hack_details("4.4088 ms on inputs it had never seen against 1.8947 ms on inputs seen before");
  flagged.add_hack_flags(v1::HACK_TORCH_FALLBACK);
  flagged.add_hack_details("aten::mm ran on a timed call");
  const std::string text = RenderTurnFeedback(flagged, 500);
  EXPECT_THAT(text, HasSubstr("it was fast only on inputs it had seen before"));
  EXPECT_THAT(text, Not(HasSubstr("1.8947"))) << "the timing check's measurement was shown";
  EXPECT_THAT(text, HasSubstr("aten::mm ran on a timed call"));
}

}  // namespace
}  // namespace kforge
