// What a step's scored groups become: GRPO sequences with group-relative
// (and, hierarchically, per-segment) advantages, best-of-N picks, supervised
// sequences from reference solutions, and the step's figures.
#include "learner/training/step_batches.h"

#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/config/proto_defaults.h"
#include "learner/rewards/completion_format.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "prompts/task_prompt.h"
#include "tests/support/tiny_checkpoint.h"

namespace kforge {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

class StepBatchesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::WriteTinyCheckpoint().release();
    tokenizer_ = BpeTokenizer::FromFile(dir_->Sub("model/tokenizer.json"))->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete dir_;
  }

  // A sample whose completion is `text`, tokenised, with log-probs -1.
  v1::ScoredSample Sample(const std::string& text, bool correct, int index) {
    v1::ScoredSample s;
    s.mutable_sample()->mutable_key()->set_index_in_group(index);
    s.mutable_sample()->set_completion_text(text);
    for (int32_t id : tokenizer_->Encode("prompt")) s.mutable_sample()->add_prompt_tokens(id);
    for (int32_t id : tokenizer_->Encode(text)) {
      s.mutable_sample()->add_completion_tokens(id);
      s.mutable_sample()->add_completion_logprobs(-1.0f);
    }
    v1::StageResult* stage = s.mutable_verdict()->add_stages();
    stage->set_stage(v1::STAGE_STATIC);
    stage->set_outcome(correct ? v1::OUTCOME_PASSED : v1::OUTCOME_FAILED);
    if (correct) {
      for (v1::Stage st : {v1::STAGE_COMPILE, v1::STAGE_TINY_RUN, v1::STAGE_MULTI_INPUT}) {
        v1::StageResult* r = s.mutable_verdict()->add_stages();
        r->set_stage(st);
        r->set_outcome(v1::OUTCOME_PASSED);
      }
      s.mutable_verdict()->set_correct(true);
    }
    return s;
  }

  std::vector<ScoredGroup> Groups(std::vector<std::vector<v1::ScoredSample>> samples, int level = 1) {
    v1::JobSpec spec;
    EXPECT_TRUE(ApplyProtoDefaults(&spec).ok());
    spec.mutable_reward()->set_format_weight(0);
    std::vector<CompletedGroup> completed(samples.size());
    for (size_t g = 0; g < samples.size(); ++g) {
      completed[g].item.mutable_task()->set_level(level);
      completed[g].samples = std::move(samples[g]);
    }
    return ScoreGroups(std::move(completed), spec);
  }

  static v1::GrpoParams Grpo() {
    v1::GrpoParams grpo;
    EXPECT_TRUE(ApplyProtoDefaults(&grpo).ok());
    return grpo;
  }

  static testing::ScratchDir* dir_;
  static BpeTokenizer* tokenizer_;
};
testing::ScratchDir* StepBatchesTest::dir_ = nullptr;
BpeTokenizer* StepBatchesTest::tokenizer_ = nullptr;

TEST_F(StepBatchesTest, GrpoGivesEveryTokenItsSamplesGroupRelativeAdvantage) {
  auto groups = Groups({{Sample("a", true, 0), Sample("b", false, 1)}});
  GroupSelection selection;
  std::vector<TrainSequence> batch = GrpoSequences(groups, Grpo(), false, *tokenizer_, &selection);
  ASSERT_EQ(batch.size(), 2u);
  // Rewards 1 and 0: mean 0.5, sample std 0.7071 -> +-0.7071 (eps aside).
  for (float a : batch[0].advantages) EXPECT_NEAR(a, 0.7071, 1e-3);
  for (float a : batch[1].advantages) EXPECT_NEAR(a, -0.7071, 1e-3);
  EXPECT_EQ(batch[0].old_logprobs.size(), batch[0].completion.size());
  EXPECT_EQ(selection.skipped_groups, 0);
}

TEST_F(StepBatchesTest, GroupsWithoutRewardVarianceAreSkippedWhenAsked) {
  auto groups = Groups({{Sample("a", true, 0), Sample("b", true, 1)},
                        {Sample("c", false, 0), Sample("d", true, 1)}});
  GroupSelection selection;
  EXPECT_EQ(GrpoSequences(groups, Grpo(), false, *tokenizer_, &selection).size(), 2u);
  EXPECT_EQ(selection.skipped_groups, 1);
  v1::GrpoParams keep = Grpo();
  keep.set_skip_zero_variance_groups(false);
  GroupSelection none;
  EXPECT_EQ(GrpoSequences(groups, keep, false, *tokenizer_, &none).size(), 4u);
}

TEST_F(StepBatchesTest, VerifierFaultsAreLeftOut) {
  auto groups = Groups({{Sample("a", true, 0), Sample("b", false, 1), Sample("c", false, 2)}});
  v1::ScoredSample& fault = groups[0].samples[2];
  fault.mutable_verdict()->mutable_stages(0)->set_outcome(v1::OUTCOME_INTERNAL_ERROR);
  groups[0].rewards[2].usable = false;
  GroupSelection selection;
  EXPECT_EQ(GrpoSequences(groups, Grpo(), false, *tokenizer_, &selection).size(), 2u);
  EXPECT_EQ(selection.unusable_samples, 1);
}

TEST_F(StepBatchesTest, HierarchicalRewardsSplitAdvantagesAtTheEndOfTheReasoning) {
  const std::string text = "<think>\nplan\n</think>\n<answer>\n```python\nx = 1\n```\n</answer>";
  auto groups = Groups({{Sample(text, true, 0), Sample(text, false, 1)}});
  groups[0].rewards[0].reasoning = 1.0;  // reasoning rewards differ ...
  groups[0].rewards[1].reasoning = 0.0;
  groups[0].rewards[0].code = 0.5;  // ... code rewards too, the other way round
  groups[0].rewards[1].code = 1.0;
  GroupSelection selection;
  std::vector<TrainSequence> batch = GrpoSequences(groups, Grpo(), true, *tokenizer_, &selection);
  ASSERT_EQ(batch.size(), 2u);
  const CompletionFormat format = AnalyzeCompletionFormat(text, true);
  size_t offset = 0;
  int reasoning_tokens = 0, code_tokens = 0;
  for (size_t i = 0; i < batch[0].completion.size(); ++i) {
    const bool reasoning = offset < format.reasoning_end;
    (reasoning ? reasoning_tokens : code_tokens)++;
    EXPECT_GT(reasoning ? batch[0].advantages[i] : -batch[0].advantages[i], 0) << "token " << i;
    offset += tokenizer_->RawBytes(batch[0].completion[i]).size();
  }
  EXPECT_GT(reasoning_tokens, 0);
  EXPECT_GT(code_tokens, 0);
}

TEST_F(StepBatchesTest, BestOfNTakesTheTopKAboveTheThreshold) {
  auto groups = Groups({{Sample("a", false, 0), Sample("b", true, 1), Sample("c", true, 2)},
                        {Sample("d", false, 0), Sample("e", false, 1)}});
  v1::BestOfNParams params;
  params.set_top_k(1);
  params.set_reward_threshold(0.7);
  GroupSelection selection;
  std::vector<TrainSequence> batch = BestOfNSequences(groups, params, &selection);
  ASSERT_EQ(batch.size(), 1u);  // b: the first of the two best
  EXPECT_EQ(batch[0].completion, tokenizer_->Encode("b"));
  EXPECT_EQ(selection.skipped_groups, 1);  // nothing above 0.7 in the second group
  params.set_top_k(5);
  EXPECT_EQ(BestOfNSequences(groups, params, &selection).size(), 2u);
}

// A multi-turn group of two trajectories (max_turns 2, gamma 0.4): the first
// fails (reward 0) then succeeds (1), the second succeeds at once (1).
// Returns: G(0,t0) = 0 + 0.4 * 1 = 0.4, G(0,t1) = 1, G(1,t0) = 1.
using MakeSample = std::function<v1::ScoredSample(const std::string&, bool, int)>;

std::vector<ScoredGroup> TurnGroup(v1::MultiTurnSpec::Baseline baseline,
                                   const BpeTokenizer& tokenizer, const MakeSample& make) {
  v1::JobSpec spec;
  EXPECT_TRUE(ApplyProtoDefaults(&spec).ok());
  spec.mutable_reward()->set_format_weight(0);
  CompletedGroup completed;
  *completed.item.mutable_multi_turn() = spec.multi_turn();
  completed.item.mutable_multi_turn()->set_max_turns(2);
  completed.item.mutable_multi_turn()->set_baseline(baseline);
  v1::ScoredSample first = make("a", false, 0);
  v1::ScoredSample second = make("b", true, 0);
  second.mutable_sample()->mutable_key()->set_turn(1);
  second.mutable_sample()->clear_prompt_tokens();
  for (int32_t id : tokenizer.Encode("prompt with feedback")) {
    second.mutable_sample()->add_prompt_tokens(id);
  }
  completed.samples = {first, second, make("c", true, 1)};
  std::vector<CompletedGroup> all;
  all.push_back(std::move(completed));
  return ScoreGroups(std::move(all), spec);
}

TEST_F(StepBatchesTest, MultiTurnGrpoTrainsEveryTurnWithLeaveOneOutTurnAdvantages) {
  auto make = [this](const std::string& text, bool correct, int index) {
    return Sample(text, correct, index);
  };
  auto groups = TurnGroup(v1::MultiTurnSpec::BASELINE_LEAVE_ONE_OUT, *tokenizer_, make);
  ASSERT_DOUBLE_EQ(groups[0].rewards[0].total, 0.0);
  ASSERT_DOUBLE_EQ(groups[0].rewards[1].total, 1.0);
  GroupSelection selection;
  std::vector<TrainSequence> batch = GrpoSequences(groups, Grpo(), false, *tokenizer_, &selection);
  ASSERT_EQ(batch.size(), 3u);
  // Turn 0: each against the other's return; turn 1: reached by one alone.
  EXPECT_NEAR(batch[0].advantages[0], 0.4 - 1.0, 1e-6);
  EXPECT_NEAR(batch[1].advantages[0], 0.0, 1e-6);
  EXPECT_NEAR(batch[2].advantages[0], 1.0 - 0.4, 1e-6);
  // Each turn over its own prompt and completion.
  EXPECT_EQ(batch[1].prompt, tokenizer_->Encode("prompt with feedback"));
  EXPECT_EQ(batch[1].completion, tokenizer_->Encode("b"));
  EXPECT_EQ(batch[0].prompt, tokenizer_->Encode("prompt"));
}

TEST_F(StepBatchesTest, MultiTurnGrpoWithTheGroupMeanBaseline) {
  auto make = [this](const std::string& text, bool correct, int index) {
    return Sample(text, correct, index);
  };
  auto groups = TurnGroup(v1::MultiTurnSpec::BASELINE_GROUP_MEAN, *tokenizer_, make);
  GroupSelection selection;
  std::vector<TrainSequence> batch = GrpoSequences(groups, Grpo(), false, *tokenizer_, &selection);
  ASSERT_EQ(batch.size(), 3u);
  // Turn 0's mean return is 0.7.
  EXPECT_NEAR(batch[0].advantages[0], 0.4 - 0.7, 1e-6);
  EXPECT_NEAR(batch[1].advantages[0], 0.0, 1e-6);
  EXPECT_NEAR(batch[2].advantages[0], 1.0 - 0.7, 1e-6);
}

TEST_F(StepBatchesTest, MultiTurnBestOfNTakesEachTrajectorysBestTurn) {
  auto make = [this](const std::string& text, bool correct, int index) {
    return Sample(text, correct, index);
  };
  auto groups = TurnGroup(v1::MultiTurnSpec::BASELINE_LEAVE_ONE_OUT, *tokenizer_, make);
  v1::BestOfNParams params;
  params.set_top_k(5);
  params.set_reward_threshold(0.7);
  GroupSelection selection;
  std::vector<TrainSequence> batch = BestOfNSequences(groups, params, &selection);
  ASSERT_EQ(batch.size(), 2u);  // one per trajectory, never its failed turn
  EXPECT_EQ(batch[0].completion, tokenizer_->Encode("b"));
  EXPECT_EQ(batch[1].completion, tokenizer_->Encode("c"));
}

TEST_F(StepBatchesTest, SupervisedSequencesCycleThroughSolvedTasksInTheAskedFormat) {
  std::vector<v1::Task> tasks(3);
  for (int i = 0; i < 3; ++i) {
    tasks[i].set_id("level1/t" + std::to_string(i));
    tasks[i].set_reference_source("class Model: pass\n");
    if (i != 1) tasks[i].set_reference_solution("class ModelNew" + std::to_string(i) + ": pass\n");
  }
  v1::PromptTemplate prompt;
  auto batch = SupervisedSequences(tasks, prompt, *tokenizer_, /*eos=*/5, /*offset=*/1, /*count=*/3);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->size(), 3u);
  // Solved tasks are 0 and 2; from offset 1: 2, 0, 2.
  auto text = [&](const TrainSequence& s) {
    std::vector<int32_t> ids(s.completion.begin(), s.completion.end() - 1);
    return *tokenizer_->Decode(ids);
  };
  EXPECT_THAT(text((*batch)[0]), HasSubstr("ModelNew2"));
  EXPECT_THAT(text((*batch)[1]), HasSubstr("ModelNew0"));
  EXPECT_EQ((*batch)[0].completion.back(), 5);
  const CompletionFormat format = AnalyzeCompletionFormat(text((*batch)[0]), true);
  EXPECT_EQ(format.score, 1.0) << format.problem << "\n" << text((*batch)[0]);
  std::vector<v1::Task> unsolved(1, tasks[1]);
  EXPECT_EQ(SupervisedSequences(unsolved, prompt, *tokenizer_, 5, 0, 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(StepBatchesTest, AShareOfSupervisedSequencesAreRevisionsOfAWrongEarlierAnswer) {
  std::vector<v1::Task> tasks(2);
  for (int i = 0; i < 2; ++i) {
    tasks[i].set_id("level1/t" + std::to_string(i));
    tasks[i].set_reference_source("class Model: pass\n");
    tasks[i].set_reference_solution(absl::StrCat("import torch\nclass ModelNew", i,
                                                 ":\n    pass\nKERNEL", i, " = 1\n"));
  }
  v1::PromptTemplate prompt;  // chatml, with reasoning tags (the defaults)
  auto text = [&](const std::vector<int32_t>& ids) { return *tokenizer_->Decode(ids); };
  constexpr int kCount = 200;
  auto batch = SupervisedSequences(tasks, prompt, *tokenizer_, /*eos=*/5, /*offset=*/0, kCount,
                                   /*follow_up_share=*/0.5, /*feedback_max_chars=*/500);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->size(), static_cast<size_t>(kCount));
  int revisions = 0;
  int other_task[2] = {0, 0}, cut_short[2] = {0, 0}, no_code[2] = {0, 0};
  for (size_t i = 0; i < batch->size(); ++i) {
    const TrainSequence& seq = (*batch)[i];
    const std::string p = text(seq.prompt);
    const std::string c = text({seq.completion.begin(), seq.completion.end() - 1});
    const int own = static_cast<int>(i % 2), other = 1 - own;
    // The completion is always the task's own solution, whole.
    EXPECT_THAT(c, HasSubstr(absl::StrCat("KERNEL", own, " = 1")));
    if (p.find("The verifier's feedback on your answer") == std::string::npos) {
      EXPECT_EQ(p, *RenderTaskPrompt(prompt, tasks[static_cast<size_t>(own)]));
      continue;
    }
    ++revisions;
    // The prompt ends where the revised answer begins, as the rollout
    // worker's follow-up prompts do.
    EXPECT_THAT(p, EndsWith("<|im_start|>assistant\n"));
    if (p.find(absl::StrCat("class ModelNew", own)) == std::string::npos &&
        p.find(absl::StrCat("class ModelNew", other)) == std::string::npos) {
      ++no_code[own];  // reasoning only: the static check found nothing
      EXPECT_THAT(p, HasSubstr("did not pass the static check"));
    } else if (p.find(absl::StrCat("KERNEL", other)) != std::string::npos) {
      ++other_task[own];
      EXPECT_THAT(p, HasSubstr("did not pass the first run, on small inputs"));
    } else {
      ++cut_short[own];
      // Cut before its last lines, and failed by the static check.
      EXPECT_THAT(p, HasSubstr(absl::StrCat("class ModelNew", own)));
      EXPECT_THAT(p, Not(HasSubstr(absl::StrCat("KERNEL", own))));
      EXPECT_THAT(p, HasSubstr("did not pass the static check"));
    }
  }
  // About half are revisions, and every task gets both kinds.
  EXPECT_GT(revisions, kCount * 3 / 10);
  EXPECT_LT(revisions, kCount * 7 / 10);
  for (int t = 0; t < 2; ++t) {
    EXPECT_GT(other_task[t], 5) << "task " << t;
    EXPECT_GT(cut_short[t], 5) << "task " << t;
    EXPECT_GT(no_code[t], 5) << "task " << t;
  }
  // A resumed job draws the same sequences from the same place.
  auto resumed = SupervisedSequences(tasks, prompt, *tokenizer_, 5, /*offset=*/50, 10, 0.5, 500);
  ASSERT_TRUE(resumed.ok());
  for (size_t i = 0; i < resumed->size(); ++i) {
    EXPECT_EQ((*resumed)[i].prompt, (*batch)[50 + i].prompt) << i;
  }
  // A one-line solution cannot be cut short: its revisions never show it
  // whole as the wrong answer.
  std::vector<v1::Task> one_line(1, tasks[0]);
  one_line[0].set_reference_solution("class ModelNew0: pass\n");
  auto whole = SupervisedSequences(one_line, prompt, *tokenizer_, 5, 0, 30, /*share=*/1.0, 500);
  ASSERT_TRUE(whole.ok());
  for (const TrainSequence& seq : *whole) {
    EXPECT_THAT(text(seq.prompt), Not(HasSubstr("class ModelNew0: pass")));
  }
  // Share 0 (and single-turn jobs, which pass 0): first-turn prompts only.
  auto plain = SupervisedSequences(tasks, prompt, *tokenizer_, 5, 0, 20);
  ASSERT_TRUE(plain.ok());
  for (const TrainSequence& seq : *plain) {
    EXPECT_THAT(text(seq.prompt), Not(HasSubstr("The verifier's feedback")));
  }
}

TEST_F(StepBatchesTest, TheStepSummaryCountsPassRatesPerStageAndLevel) {
  auto groups = Groups({{Sample("a", true, 0), Sample("b", false, 1)}}, /*level=*/2);
  v1::JobProgress progress;
  LearnerMetrics::StepFigures figures;
  SummariseStep(groups, /*policy_version=*/3, &progress, &figures);
  EXPECT_DOUBLE_EQ(progress.pass_rates().static_pass(), 0.5);
  EXPECT_DOUBLE_EQ(progress.pass_rates().correct(), 0.5);
  EXPECT_DOUBLE_EQ(progress.correct_by_level().at(2), 0.5);
  EXPECT_DOUBLE_EQ(progress.mean_reward(), 0.5);  // 1 and 0, no format term
  EXPECT_THAT(figures.staleness, ::testing::ElementsAre(3, 3));
  EXPECT_EQ(progress.solved_by_turn_size(), 0);  // single-turn
  EXPECT_EQ(progress.reward_by_turn_size(), 0);
  EXPECT_EQ(progress.turns_per_trajectory(), 0);
  EXPECT_TRUE(figures.trajectory_turns.empty());
}

TEST_F(StepBatchesTest, TheStepSummaryGivesTheShareOfTrajectoriesSolvedByEachTurn) {
  auto make = [this](const std::string& text, bool correct, int index) {
    return Sample(text, correct, index);
  };
  // Trajectory 0 is solved at turn 1, trajectory 1 at turn 0.
  auto groups = TurnGroup(v1::MultiTurnSpec::BASELINE_LEAVE_ONE_OUT, *tokenizer_, make);
  v1::JobProgress progress;
  LearnerMetrics::StepFigures figures;
  SummariseStep(groups, /*policy_version=*/0, &progress, &figures);
  EXPECT_THAT(progress.solved_by_turn(), ::testing::ElementsAre(0.5, 1.0));
  // Turn 0's rewards 0 and 1, turn 1's 1; trajectories of 2 and 1 turns.
  EXPECT_THAT(progress.reward_by_turn(), ::testing::ElementsAre(0.5, 1.0));
  EXPECT_DOUBLE_EQ(progress.turns_per_trajectory(), 1.5);
  EXPECT_THAT(figures.trajectory_turns, ::testing::ElementsAre(2, 1));
}

}  // namespace
}  // namespace kforge
