#include "verifier_worker/extract/code_extraction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSolution[] =
    "import torch\n"
    "\n"
    "class ModelNew(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        return x\n";

ExtractedCode MustExtract(const std::string& completion) {
  absl::StatusOr<ExtractedCode> extracted = ExtractCandidateCode(completion);
  EXPECT_TRUE(extracted.ok()) << extracted.status();
  return extracted.ok() ? *extracted : ExtractedCode{};
}

TEST(CodeExtractionTest, TakesPythonFencedBlock) {
  const ExtractedCode got =
      MustExtract(absl::StrCat("Here is my kernel:\n\n```python\n", kSolution, "```\nDone."));
  EXPECT_EQ(got.code, kSolution);
  EXPECT_EQ(got.how, "fenced block 1 of 1 (```python)");
}

TEST(CodeExtractionTest, AcceptsLanguageTagVariantsAndTildeFences) {
  for (const std::string open : {"```py", "```Python", "```python3", "```", "~~~", "~~~python"}) {
    const std::string close = open.substr(0, 3);
    const ExtractedCode got =
        MustExtract(absl::StrCat("Text\n", open, "\n", kSolution, close, "\n"));
    EXPECT_EQ(got.code, kSolution) << open;
    EXPECT_EQ(got.how, absl::StrCat("fenced block 1 of 1 (", open, ")")) << open;
  }
}

TEST(CodeExtractionTest, UnterminatedLastFenceRunsToTheEnd) {
  const ExtractedCode got = MustExtract(
      absl::StrCat("```python\nimport os\n```\nNow the kernel:\n```python\n", kSolution));
  EXPECT_EQ(got.code, kSolution);
  EXPECT_EQ(got.how, "fenced block 2 of 2 (```python, unterminated)");
}

TEST(CodeExtractionTest, PrefersTheBlockThatDefinesModelNew) {
  const ExtractedCode got = MustExtract(
      absl::StrCat("The reference:\n```python\nclass Model(torch.nn.Module):\n    pass\n```\n"
                   "Mine:\n```python\n",
                   kSolution, "```\nUsage:\n```python\nmodel = ModelNew()\n```\n"));
  EXPECT_EQ(got.code, kSolution);
  EXPECT_EQ(got.how, "fenced block 2 of 3 (```python)");
}

TEST(CodeExtractionTest, TakesTheLastOfSeveralModelNewBlocks) {
  const std::string second = "class ModelNew:\n    version = 2\n";
  const ExtractedCode got = MustExtract(
      absl::StrCat("```python\n", kSolution, "```\nImproved:\n```python\n", second, "```\n"));
  EXPECT_EQ(got.code, second);
  EXPECT_EQ(got.how, "fenced block 2 of 2 (```python)");
}

TEST(CodeExtractionTest, WithoutModelNewTakesTheLastPythonBlockOverOtherLanguages) {
  const ExtractedCode got = MustExtract(
      "```python\nx = 1\n```\n```python\ny = 2\n```\n```bash\npip install triton\n```\n");
  EXPECT_EQ(got.code, "y = 2\n");
  EXPECT_EQ(got.how, "fenced block 2 of 3 (```python)");
}

TEST(CodeExtractionTest, AnswerTagWithoutFenceIsTheCode) {
  const ExtractedCode got =
      MustExtract(absl::StrCat("I will write it.\n<answer>\n", kSolution, "</answer>\n"));
  EXPECT_EQ(got.code, kSolution);
  EXPECT_EQ(got.how, "<answer> tag");
}

TEST(CodeExtractionTest, FencedBlockInsideAnswerTagIsTakenOverOneOutside) {
  const std::string draft = "class ModelNew:\n    draft = True\n";
  const ExtractedCode got = MustExtract(absl::StrCat(
      "Draft:\n```python\n", draft, "```\n<answer>\n```python\n", kSolution, "```\n</answer>"));
  EXPECT_EQ(got.code, kSolution);
  EXPECT_EQ(got.how, "fenced block 2 of 2 (```python) inside <answer> tag");
}

TEST(CodeExtractionTest, BlockInsideThinkNeverWinsOverOneOutside) {
  const std::string thought = "class ModelNew:\n    thought = True\n";
  const ExtractedCode got =
      MustExtract(absl::StrCat("<think>\nMaybe:\n```python\n", thought,
                               "```\n</think>\nFinal:\n```python\n", kSolution, "```\n"));
  EXPECT_EQ(got.code, kSolution);
  EXPECT_EQ(got.how, "fenced block 1 of 1 (```python)");

  // Reasoning is ignored even when what follows it defines no ModelNew.
  const ExtractedCode only_outside = MustExtract(
      absl::StrCat("<think>```python\n", thought, "```</think>\n```python\nx = 1\n```\n"));
  EXPECT_EQ(only_outside.code, "x = 1\n");
}

TEST(CodeExtractionTest, ReasoningWithoutOpeningTagOrUnclosedIsIgnored) {
  // Templates that put <think> in the prompt leave only the closing tag.
  const ExtractedCode got = MustExtract(
      absl::StrCat("Let me try\n```python\nclass ModelNew:\n    pass\n```\n</think>\n```python\n",
                   kSolution, "```"));
  EXPECT_EQ(got.code, kSolution);

  absl::StatusOr<ExtractedCode> unclosed =
      ExtractCandidateCode(absl::StrCat("<think>\n```python\n", kSolution, "```\n"));
  EXPECT_EQ(unclosed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unclosed.status().message(), HasSubstr("text inside <think> is ignored"));
}

TEST(CodeExtractionTest, StripsChatMarkupAndNormalizesCrlf) {
  std::string crlf_solution = kSolution;
  for (size_t pos = 0; (pos = crlf_solution.find('\n', pos)) != std::string::npos; pos += 2) {
    crlf_solution.replace(pos, 1, "\r\n");
  }
  const ExtractedCode got = MustExtract(absl::StrCat(
      "<|start_header_id|>assistant<|end_header_id|>\r\n\r\n<|im_start|>assistant\r\n```python\r\n",
      crlf_solution, "```<|im_end|><|eot_id|><|endoftext|>"));
  EXPECT_EQ(got.code, kSolution);
  EXPECT_THAT(got.code, Not(HasSubstr("\r")));

  // Markup with no fences at all still leaves plain Python behind.
  const ExtractedCode bare =
      MustExtract(absl::StrCat("<|im_start|>assistant\n", kSolution, "<|im_end|>\n"));
  EXPECT_EQ(bare.code, kSolution);
  EXPECT_EQ(bare.how, "whole text");
}

TEST(CodeExtractionTest, PlainPythonWithModelNewIsTheWholeText) {
  const ExtractedCode got = MustExtract(kSolution);
  EXPECT_EQ(got.code, kSolution);
  EXPECT_EQ(got.how, "whole text");

  const ExtractedCode after_prose = MustExtract(absl::StrCat("Here it is:\n", kSolution));
  EXPECT_EQ(after_prose.code, kSolution);
  EXPECT_EQ(after_prose.how, "text from line 2");
}

TEST(CodeExtractionTest, TextWithoutCodeIsInvalidArgument) {
  for (const std::string& completion :
       {std::string(""), std::string("I cannot write this kernel."),
        std::string("<think>hmm</think>\nSorry."), std::string("<|im_end|>")}) {
    absl::StatusOr<ExtractedCode> got = ExtractCandidateCode(completion);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << completion;
    EXPECT_THAT(got.status().message(),
                HasSubstr("no code found in the completion (no fenced block, no <answer> tag, "
                          "no class ModelNew)"))
        << completion;
  }
}

TEST(CodeExtractionTest, OnlyOtherLanguageBlocksIsInvalidArgument) {
  absl::StatusOr<ExtractedCode> got = ExtractCandidateCode("```bash\nls\n```\n");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("no code found in the completion"));
}

TEST(CodeExtractionTest, CodeWithoutModelNewIsStillReturned) {
  const ExtractedCode got = MustExtract("```python\nimport torch\nclass Model:\n    pass\n```\n");
  EXPECT_EQ(got.code, "import torch\nclass Model:\n    pass\n");
  EXPECT_FALSE(DefinesModelNew(got.code));
}

TEST(CodeExtractionTest, IndentedFenceIsDedented) {
  const ExtractedCode got =
      MustExtract("1. The kernel:\n   ```python\n   class ModelNew:\n       pass\n   ```\n");
  EXPECT_EQ(got.code, "class ModelNew:\n    pass\n");
}

TEST(CodeExtractionTest, DefinesModelNewNeedsAClassStatement) {
  EXPECT_TRUE(DefinesModelNew("class ModelNew(nn.Module):\n"));
  EXPECT_TRUE(DefinesModelNew("x = 1\nclass  ModelNew :\n"));
  EXPECT_FALSE(DefinesModelNew("# class ModelNew(nn.Module)\n"));
  EXPECT_FALSE(DefinesModelNew("class ModelNewer(nn.Module):\n"));
  EXPECT_FALSE(DefinesModelNew("m = ModelNew()\n"));
}

}  // namespace
}  // namespace kforge
