// The rollout worker's multi-turn books: a verdict ends a trajectory or
// becomes the next turn's item, whose prompt shows the earlier answer
// (without its reasoning) and the verifier's feedback.
#include "rollout_worker/turns/turn_loop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "prompts/trajectory_end.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::WorkItem Item(int max_turns) {
  v1::WorkItem item;
  item.set_job_id("job-1");
  item.set_group_id("g");
  item.set_group_size(4);
  item.add_prompt_tokens(11);
  item.set_prompt_text("first prompt");
  item.mutable_task()->set_id("relu");
  item.mutable_task()->set_reference_source("class Model:\n    pass\n");
  item.mutable_multi_turn()->set_max_turns(max_turns);
  item.mutable_multi_turn()->set_stop_speedup(1.0);
  item.mutable_multi_turn()->set_feedback_max_chars(1500);
  return item;
}

v1::Sample Sample(int index, int turn, const std::string& completion) {
  v1::Sample sample;
  sample.mutable_key()->set_sample_id(TurnSampleId("job-1", "g", index, turn));
  sample.mutable_key()->set_group_id("g");
  sample.mutable_key()->set_index_in_group(index);
  sample.mutable_key()->set_turn(turn);
  sample.set_completion_text(completion);
  return sample;
}

v1::Verdict CompileError() {
  v1::Verdict verdict;
  verdict.set_stage_reached(v1::STAGE_COMPILE);
  v1::StageResult* stage = verdict.add_stages();
  stage->set_stage(v1::STAGE_STATIC);
  stage->set_outcome(v1::OUTCOME_PASSED);
  stage = verdict.add_stages();
  stage->set_stage(v1::STAGE_COMPILE);
  stage->set_outcome(v1::OUTCOME_FAILED);
  stage->set_message("NameError: name 'tl' is not defined");
  return verdict;
}

v1::Verdict Correct() {
  v1::Verdict verdict;
  verdict.set_correct(true);
  v1::StageResult* stage = verdict.add_stages();
  stage->set_stage(v1::STAGE_MULTI_INPUT);
  stage->set_outcome(v1::OUTCOME_PASSED);
  return verdict;
}

TEST(TurnLoopTest, SampleIdsOfLaterTurnsCarryTheTurn) {
  EXPECT_EQ(TurnSampleId("job-1", "g", 2, 0), "job-1/g/2");
  EXPECT_EQ(TurnSampleId("job-1", "g", 2, 1), "job-1/g/2/t1");
}

TEST(TurnLoopTest, SingleTurnItemsAreNotTracked) {
  TurnLoop turns;
  turns.Sampled(Sample(0, 0, "answer"), Item(1));
  EXPECT_EQ(turns.open_trajectories(), 0u);
  EXPECT_FALSE(turns.Answered("job-1/g/0", CompileError()).has_value());
}

TEST(TurnLoopTest, AFailedTurnBecomesTheNextTurnWithTheFeedbackAndWithoutTheReasoning) {
  TurnLoop turns;
  turns.Sampled(Sample(2, 0,
                       "<think>my private plan</think>"
                       "<answer>```python\nclass ModelNew: pass\n```</answer>"),
                Item(3));
  std::optional<TurnLoop::FollowUp> next = turns.Answered("job-1/g/2", CompileError());
  ASSERT_TRUE(next.has_value());
  ASSERT_TRUE(next->item.ok()) << next->item.status();
  const v1::WorkItem& item = *next->item;
  EXPECT_EQ(next->group_id, "g");
  EXPECT_EQ(item.group_id(), "g");
  EXPECT_EQ(item.group_size(), 1);
  EXPECT_EQ(item.turn(), 1);
  EXPECT_EQ(item.trajectory_index(), 2);
  EXPECT_TRUE(item.prompt_tokens().empty());  // the engine encodes the new text
  EXPECT_THAT(item.prompt_text(), HasSubstr("NameError"));
  EXPECT_THAT(item.prompt_text(), HasSubstr("class ModelNew: pass"));
  EXPECT_THAT(item.prompt_text(), Not(HasSubstr("my private plan")));
  EXPECT_EQ(turns.open_trajectories(), 1u);

  // The second turn is correct: the trajectory ends.
  turns.Sampled(Sample(2, 1, "<answer>```python\nclass ModelNew: ...\n```</answer>"), item);
  EXPECT_FALSE(turns.Answered("job-1/g/2/t1", Correct()).has_value());
  EXPECT_EQ(turns.open_trajectories(), 0u);
}

TEST(TurnLoopTest, TheLastAllowedTurnEndsTheTrajectoryWhateverItsVerdict) {
  TurnLoop turns;
  turns.Sampled(Sample(0, 0, "a"), Item(2));
  std::optional<TurnLoop::FollowUp> next = turns.Answered("job-1/g/0", CompileError());
  ASSERT_TRUE(next.has_value() && next->item.ok());
  turns.Sampled(Sample(0, 1, "b"), *next->item);
  EXPECT_FALSE(turns.Answered("job-1/g/0/t1", CompileError()).has_value());
  EXPECT_EQ(turns.open_trajectories(), 0u);
}

TEST(TurnLoopTest, ADroppedGroupIsForgotten) {
  TurnLoop turns;
  turns.Sampled(Sample(0, 0, "a"), Item(3));
  turns.Sampled(Sample(1, 0, "b"), Item(3));
  turns.DropGroup("g");
  EXPECT_EQ(turns.open_trajectories(), 0u);
  EXPECT_FALSE(turns.Answered("job-1/g/0", CompileError()).has_value());
}

TEST(TurnLoopTest, AnEvaluationItemStaysSingleTurn) {
  TurnLoop turns;
  v1::WorkItem item = Item(3);
  item.set_eval(true);
  turns.Sampled(Sample(0, 0, "a"), item);
  EXPECT_FALSE(turns.Answered("job-1/g/0", CompileError()).has_value());
}

}  // namespace
}  // namespace kforge
