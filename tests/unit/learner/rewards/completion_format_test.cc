// The format score and the reasoning / code byte ranges of a completion, with
// and without reasoning tags.
#include "learner/rewards/completion_format.h"

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

constexpr char kThink[] = "<think>\nUse one Triton kernel with a mask.\n</think>\n";
constexpr char kBlock[] = "```python\nclass ModelNew:\n    pass\n```\n";

std::string Answer(const std::string& body) {
  return absl::StrCat("<answer>\n", body, "</answer>");
}

void ExpectPartition(const CompletionFormat& f, const std::string& text) {
  EXPECT_EQ(f.reasoning_begin, 0u);
  EXPECT_EQ(f.code_begin, f.reasoning_end);
  EXPECT_EQ(f.code_end, text.size());
}

TEST(CompletionFormatTest, ThinkThenAnswerWithOnePythonBlockScoresOne) {
  const std::string text = absl::StrCat(kThink, Answer(kBlock));
  const CompletionFormat f = AnalyzeCompletionFormat(text, /*reasoning_tags=*/true);
  EXPECT_TRUE(f.has_think);
  EXPECT_TRUE(f.has_answer);
  EXPECT_EQ(f.code_blocks, 1);
  EXPECT_EQ(f.score, 1.0);
  EXPECT_EQ(f.problem, "");
  // The reasoning range ends just past </think>; the code range is the rest.
  EXPECT_EQ(text.substr(0, f.reasoning_end),
            "<think>\nUse one Triton kernel with a mask.\n</think>");
  EXPECT_EQ(text.substr(f.code_begin), absl::StrCat("\n", Answer(kBlock)));
  ExpectPartition(f, text);
}

TEST(CompletionFormatTest, UntaggedFenceAndTagsOnTheFenceLinesAreAccepted) {
  const std::string text =
      absl::StrCat(kThink, "<answer>```\nclass ModelNew:\n    pass\n```</answer>");
  const CompletionFormat f = AnalyzeCompletionFormat(text, true);
  EXPECT_EQ(f.code_blocks, 1);
  EXPECT_EQ(f.score, 1.0) << f.problem;
}

TEST(CompletionFormatTest, TrailingChatMarkupIsIgnored) {
  const std::string text = absl::StrCat(kThink, Answer(kBlock), "<|im_end|>");
  const CompletionFormat f = AnalyzeCompletionFormat(text, true);
  EXPECT_EQ(f.score, 1.0) << f.problem;
  EXPECT_EQ(f.code_end, text.size());
  EXPECT_EQ(AnalyzeCompletionFormat(absl::StrCat(kBlock, "<|endoftext|>"), false).score, 1.0);
}

TEST(CompletionFormatTest, WellFormedAnswerWithoutThinkScoresHalf) {
  const std::string text = absl::StrCat("Here it is.\n", Answer(kBlock));
  const CompletionFormat f = AnalyzeCompletionFormat(text, true);
  EXPECT_FALSE(f.has_think);
  EXPECT_TRUE(f.has_answer);
  EXPECT_EQ(f.score, 0.5);
  EXPECT_EQ(f.problem, "no <think> block");
  // No reasoning: the whole text is code.
  EXPECT_EQ(f.reasoning_end, 0u);
  EXPECT_EQ(f.code_begin, 0u);
  ExpectPartition(f, text);
}

TEST(CompletionFormatTest, MalformedThinkScoresHalf) {
  const std::string answer = Answer(kBlock);
  const std::pair<std::string, std::string> cases[] = {
      {absl::StrCat("<think> \n</think>", answer), "empty <think> block"},
      {absl::StrCat("Sure. <think>plan</think>", answer), "text before <think>"},
      {absl::StrCat("<think>a</think><think>b</think>", answer), "2 <think> and 2 </think> tags"},
      {absl::StrCat("plan</think>", answer), "0 <think> and 1 </think> tags"},
  };
  for (const auto& [text, problem] : cases) {
    const CompletionFormat f = AnalyzeCompletionFormat(text, true);
    EXPECT_FALSE(f.has_think) << text;
    EXPECT_EQ(f.score, 0.5) << text;
    EXPECT_EQ(f.problem, problem) << text;
    EXPECT_EQ(f.code_begin, 0u) << text;
  }
}

TEST(CompletionFormatTest, BrokenAnswerOrCodeScoresZero) {
  const std::pair<std::string, std::string> cases[] = {
      {kBlock, "no <answer> block"},
      {absl::StrCat("<answer>\n", kBlock), "unclosed <answer>"},
      {absl::StrCat(Answer(kBlock), Answer(kBlock)), "2 <answer> blocks"},
      {Answer("class ModelNew:\n    pass\n"), "no fenced block in the answer"},
      {Answer(absl::StrCat(kBlock, kBlock)), "2 fenced blocks in the answer"},
      {Answer("```python\nclass ModelNew:\n"), "unclosed fence in the answer"},
      {Answer("```bash\npip install triton\n```\n"), "fenced block tagged bash in the answer"},
      {absl::StrCat("<think>plan ", Answer(kBlock)), "unclosed <think>"},
  };
  for (const auto& [body, problem] : cases) {
    const std::string text = absl::StrCat(kThink, body);
    const CompletionFormat f = AnalyzeCompletionFormat(text, true);
    EXPECT_EQ(f.score, 0.0) << text;
    EXPECT_EQ(f.problem, problem) << text;
  }
}

TEST(CompletionFormatTest, UnclosedThinkLeavesNoReasoningRange) {
  const std::string text = absl::StrCat("<think>still thinking", kBlock);
  const CompletionFormat f = AnalyzeCompletionFormat(text, false);
  EXPECT_EQ(f.score, 0.0);
  EXPECT_EQ(f.reasoning_end, 0u);
  ExpectPartition(f, text);
}

TEST(CompletionFormatTest, WithoutReasoningTagsOneFencedBlockScoresOne) {
  const CompletionFormat f = AnalyzeCompletionFormat(absl::StrCat("My kernel:\n", kBlock), false);
  EXPECT_EQ(f.code_blocks, 1);
  EXPECT_EQ(f.score, 1.0);
  EXPECT_FALSE(f.has_answer);
  // Python-ish tags in any case are fine.
  EXPECT_EQ(AnalyzeCompletionFormat("~~~Py\nx = 1\n~~~\n", false).score, 1.0);
  EXPECT_EQ(AnalyzeCompletionFormat("```python3 file.py\nx = 1\n```", false).score, 1.0);
}

TEST(CompletionFormatTest, WithoutReasoningTagsAnythingButOneBlockScoresZero) {
  EXPECT_EQ(AnalyzeCompletionFormat("class ModelNew:\n    pass\n", false).score, 0.0);
  EXPECT_EQ(AnalyzeCompletionFormat(absl::StrCat(kBlock, kBlock), false).score, 0.0);
  const CompletionFormat unclosed = AnalyzeCompletionFormat("```python\nx = 1\n", false);
  EXPECT_EQ(unclosed.score, 0.0);
  EXPECT_EQ(unclosed.code_blocks, 0);
  EXPECT_EQ(unclosed.problem, "unclosed fence");
}

TEST(CompletionFormatTest, WithoutReasoningTagsCodeInsideTheReasoningDoesNotCount) {
  const std::string text =
      absl::StrCat("<think>maybe\n```python\nx = 0\n```\n</think>\n", kBlock);
  const CompletionFormat f = AnalyzeCompletionFormat(text, false);
  EXPECT_TRUE(f.has_think);
  EXPECT_EQ(f.code_blocks, 1);
  EXPECT_EQ(f.score, 1.0) << f.problem;
  EXPECT_EQ(text.substr(f.code_begin), absl::StrCat("\n", kBlock));
}

}  // namespace
}  // namespace kforge
