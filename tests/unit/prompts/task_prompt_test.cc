// Task prompts: the template's parts around the reference, in the chat format.
#include "prompts/task_prompt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

v1::Task ReluTask() {
  v1::Task task;
  task.set_id("level1/1_ReLU");
  task.set_reference_source("class Model:\n    pass");
  return task;
}

TEST(TaskPromptTest, DefaultsGiveAChatmlPromptWithTheReferenceAndTags) {
  absl::StatusOr<std::string> prompt = RenderTaskPrompt({}, ReluTask());
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_THAT(*prompt, StartsWith("<|im_start|>user\nWrite a faster implementation"));
  EXPECT_THAT(*prompt, HasSubstr("```python\nclass Model:\n    pass\n```\n"));
  EXPECT_THAT(*prompt, HasSubstr("<answer></answer>"));
  EXPECT_THAT(*prompt, EndsWith("<|im_end|>\n<|im_start|>assistant\n"));
}

TEST(TaskPromptTest, TemplateFieldsAreHonoured) {
  v1::PromptTemplate tmpl;
  tmpl.set_instructions("Speed this up.");
  tmpl.set_example("EXAMPLE");
  tmpl.set_reasoning_tags(false);
  tmpl.set_chat_format("plain");
  absl::StatusOr<std::string> prompt = RenderTaskPrompt(tmpl, ReluTask());
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_THAT(*prompt, StartsWith("Speed this up.\n\nExample:\nEXAMPLE\n\n"));
  EXPECT_THAT(*prompt, ::testing::Not(HasSubstr("<answer>")));
}

TEST(TaskPromptTest, BadInputIsNamed) {
  v1::PromptTemplate tmpl;
  tmpl.set_chat_format("mistral");
  EXPECT_THAT(RenderTaskPrompt(tmpl, ReluTask()).status().message(), HasSubstr("mistral"));
  EXPECT_THAT(RenderTaskPrompt({}, v1::Task()).status().message(), HasSubstr("no reference"));
}

}  // namespace
}  // namespace kforge

namespace kforge {
namespace {

// The next turn's prompt: the task, each earlier answer without its
// reasoning, the feedback on it, and the request to revise.
TEST(FollowUpPromptTest, EarlierAnswersLoseTheirReasoningAndEachIsFollowedByItsFeedback) {
  const std::vector<PastTurn> turns = {
      {"<think>secret plan one</think>\n<answer>\n```python\nclass ModelNew: v1\n```\n</answer>",
       "Your answer did not pass the first run, on small inputs: it failed."},
      {"<think>plan two</think><answer>```python\nclass ModelNew: v2\n```</answer>",
       "Your ModelNew passed every correctness check."}};
  absl::StatusOr<std::string> prompt = RenderFollowUpPrompt({}, ReluTask(), turns);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_THAT(*prompt, StartsWith("<|im_start|>user\nWrite a faster implementation"));
  EXPECT_THAT(*prompt, ::testing::Not(HasSubstr("plan one")));
  EXPECT_THAT(*prompt, ::testing::Not(HasSubstr("plan two")));
  EXPECT_THAT(*prompt, HasSubstr("<|im_start|>assistant\n<answer>\n```python\nclass ModelNew: v1\n"));
  EXPECT_THAT(*prompt, HasSubstr("feedback on your answer:\nYour answer did not pass the first run"));
  EXPECT_THAT(*prompt, HasSubstr("class ModelNew: v2"));
  const size_t first = prompt->find("v1");
  const size_t feedback = prompt->find("did not pass");
  const size_t second = prompt->find("v2");
  EXPECT_LT(first, feedback);
  EXPECT_LT(feedback, second);
  EXPECT_THAT(*prompt, HasSubstr("Revise your ModelNew. Think it through inside <think></think>"));
  EXPECT_THAT(*prompt, EndsWith("<|im_end|>\n<|im_start|>assistant\n"));
}

TEST(FollowUpPromptTest, MalformedOrUnfinishedReasoningIsDroppedToo) {
  const std::vector<PastTurn> turns = {
      {"preamble <think>a</think><think>second plan</think>```python\nclass ModelNew: v1\n```",
       "F1"},
      {"<think>reasoning that never ends and fills every token", "F2"}};
  absl::StatusOr<std::string> prompt = RenderFollowUpPrompt({}, ReluTask(), turns);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_THAT(*prompt, ::testing::Not(HasSubstr("second plan")));
  EXPECT_THAT(*prompt, ::testing::Not(HasSubstr("preamble")));
  EXPECT_THAT(*prompt, HasSubstr("<|im_start|>assistant\n```python\nclass ModelNew: v1"));
  EXPECT_THAT(*prompt, ::testing::Not(HasSubstr("never ends")));
  EXPECT_THAT(*prompt, HasSubstr("cut off while still reasoning"));
}

TEST(FollowUpPromptTest, NoEarlierTurnIsAnError) {
  absl::StatusOr<std::string> prompt = RenderFollowUpPrompt({}, ReluTask(), {});
  EXPECT_EQ(prompt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(prompt.status().message(), HasSubstr("level1/1_ReLU"));
}

}  // namespace
}  // namespace kforge
