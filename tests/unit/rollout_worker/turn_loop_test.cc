// The rollout worker's multi-turn books: a verdict ends a trajectory or
// becomes the next turn's item, whose prompt shows the earlier answer
// (without its reasoning) and the verifier's feedback.
#include "rollout_worker/turns/turn_loop.h"

#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "prompts/task_prompt.h"
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

// WHO DECIDES: the learner's ack overrides the worker's own reading of a
// verdict that a re-verification made differ from the learner's.
TEST(TurnLoopTest, TheLearnerWantingANextTurnOverridesACorrectVerdict) {
  TurnLoop turns;
  turns.Sampled(Sample(0, 0, "a"), Item(3));
  std::optional<TurnLoop::FollowUp> next =
      turns.Answered("job-1/g/0", Correct(), v1::SampleAck::NEXT_TURN_WANTED);
  ASSERT_TRUE(next.has_value());
  ASSERT_TRUE(next->item.ok());
  EXPECT_EQ(next->item->turn(), 1);
  EXPECT_EQ(turns.open_trajectories(), 1u);
}

TEST(TurnLoopTest, TheLearnerWantingNoNextTurnEndsAFailedTrajectoryAndForgetsIt) {
  // Also how the books of a group the learner retired are emptied: its
  // turns are ORPHANED, and the ack says no more.
  TurnLoop turns;
  turns.Sampled(Sample(0, 0, "a"), Item(3));
  EXPECT_FALSE(
      turns.Answered("job-1/g/0", CompileError(), v1::SampleAck::NEXT_TURN_NOT_WANTED)
          .has_value());
  EXPECT_EQ(turns.open_trajectories(), 0u);
}

TEST(TurnLoopTest, NoLearnerWordAtTheTurnLimitStillEnds) {
  TurnLoop turns;
  turns.Sampled(Sample(0, 0, "a"), Item(2));
  std::optional<TurnLoop::FollowUp> next = turns.Answered("job-1/g/0", CompileError());
  ASSERT_TRUE(next.has_value() && next->item.ok());
  turns.Sampled(Sample(0, 1, "b"), *next->item);
  EXPECT_FALSE(turns.Answered("job-1/g/0/t1", CompileError(), v1::SampleAck::NEXT_TURN_WANTED)
                   .has_value());
}

// A token per byte: budgets in the tests are lengths of text.
int64_t Bytes(const std::string& text) { return static_cast<int64_t>(text.size()); }

TEST(TurnLoopTest, AFollowUpPromptLeavesRoomForTheWholeCompletion) {
  // Three turns of long answers: unbounded, the third turn's prompt holds
  // both earlier answers; with a budget of max_len - max_new_tokens it
  // leaves the oldest answer out (its feedback stays) and fits.
  const std::string long_answer_a = "```python\n" + std::string(3000, 'a') + "\n```";
  const std::string long_answer_b = "```python\n" + std::string(3000, 'b') + "\n```";
  v1::WorkItem item = Item(3);
  item.mutable_sampling()->set_max_new_tokens(1000);
  const auto third_prompt = [&](TurnLoop& turns) {
    turns.Sampled(Sample(0, 0, long_answer_a), item);
    std::optional<TurnLoop::FollowUp> second = turns.Answered("job-1/g/0", CompileError());
    EXPECT_TRUE(second.has_value() && second->item.ok());
    turns.Sampled(Sample(0, 1, long_answer_b), *second->item);
    std::optional<TurnLoop::FollowUp> third = turns.Answered("job-1/g/0/t1", CompileError());
    EXPECT_TRUE(third.has_value() && third->item.ok());
    return third->item->prompt_text();
  };
  TurnLoop unbounded;
  const std::string full = third_prompt(unbounded);
  EXPECT_THAT(full, HasSubstr(std::string(3000, 'a')));
  const int64_t max_len = static_cast<int64_t>(full.size()) + 1000 - 100;  // 100 short
  TurnLoop bounded({.count_tokens = Bytes, .max_len = max_len});
  const std::string fitted = third_prompt(bounded);
  EXPECT_LE(static_cast<int64_t>(fitted.size()), max_len - 1000);
  EXPECT_THAT(fitted, Not(HasSubstr(std::string(3000, 'a'))));
  EXPECT_THAT(fitted, HasSubstr(kAnswerLeftOut));
  EXPECT_THAT(fitted, HasSubstr(std::string(3000, 'b')));  // the last answer stays
  // Both turns' feedback stays.
  size_t feedback = 0;
  for (size_t at = fitted.find("NameError"); at != std::string::npos;
       at = fitted.find("NameError", at + 1)) {
    ++feedback;
  }
  EXPECT_EQ(feedback, 2u);
}

TEST(TurnLoopTest, ABudgetTooSmallForTheLastTurnKeepsOnlyTheLastTurn) {
  v1::WorkItem item = Item(3);
  item.mutable_sampling()->set_max_new_tokens(1000);
  TurnLoop turns({.count_tokens = Bytes, .max_len = 1001});  // room for no prompt
  turns.Sampled(Sample(0, 0, "first answer"), item);
  std::optional<TurnLoop::FollowUp> second = turns.Answered("job-1/g/0", CompileError());
  ASSERT_TRUE(second.has_value() && second->item.ok());
  turns.Sampled(Sample(0, 1, "second answer"), *second->item);
  std::optional<TurnLoop::FollowUp> third = turns.Answered("job-1/g/0/t1", CompileError());
  ASSERT_TRUE(third.has_value() && third->item.ok());
  EXPECT_THAT(third->item->prompt_text(), Not(HasSubstr("first answer")));
  EXPECT_THAT(third->item->prompt_text(), HasSubstr("second answer"));
}

// The race a review found: DropGroup between Answered taking a trajectory
// and filing its next turn revived the dropped trajectory. The token count
// runs inside Answered (from its second follow-up on, when there is an
// earlier turn to leave out), so it starts a DropGroup there and gives it
// 200 ms to finish: it must wait for Answered, and then forget the new turn.
TEST(TurnLoopTest, ADropGroupDuringAnsweredIsNotUndone) {
  absl::Notification dropped;
  std::thread dropper;
  bool armed = false;
  TurnLoop* loop = nullptr;
  TurnLoop turns({.count_tokens =
                      [&](const std::string& text) {
                        if (armed && !dropper.joinable()) {
                          dropper = std::thread([&] {
                            loop->DropGroup("g");
                            dropped.Notify();
                          });
                          dropped.WaitForNotificationWithTimeout(absl::Milliseconds(200));
                        }
                        return static_cast<int64_t>(text.size());
                      },
                  .max_len = 1 << 20});
  loop = &turns;
  turns.Sampled(Sample(0, 0, "a"), Item(3));
  std::optional<TurnLoop::FollowUp> second = turns.Answered("job-1/g/0", CompileError());
  ASSERT_TRUE(second.has_value() && second->item.ok());
  turns.Sampled(Sample(0, 1, "b"), *second->item);
  armed = true;
  std::optional<TurnLoop::FollowUp> third = turns.Answered("job-1/g/0/t1", CompileError());
  EXPECT_TRUE(third.has_value());  // the follow-up was made before the drop
  ASSERT_TRUE(dropper.joinable());
  dropper.join();
  EXPECT_TRUE(dropped.HasBeenNotified());
  EXPECT_EQ(turns.open_trajectories(), 0u);
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
