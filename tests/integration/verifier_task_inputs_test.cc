// Tasks whose inputs are not all tensors: KernelBench's
// 5_Matrix_scalar_multiplication takes a plain float beside its matrix. The
// number reaches the candidate as the number it is, the reference runs on
// the same value, and the checks on the tensor inputs still hold.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_replace.h"

#include "tests/support/funnel_fixture.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

constexpr char kScaleTask[] = R"py(
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, s):
        return A * s


M = 256
N = 512


def get_inputs():
    return [torch.randn(M, N), 3.14]


def get_init_inputs():
    return []
)py";

// Outputs far larger than inputs (an outer product): where the reference
// server cannot size a set without running it (torch 1.x has no meta
// device), its tensors outgrow the shared buffer the verifier offers for
// them, and the epoch is made again through the socket.
constexpr char kOuterTask[] = R"py(
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.outer(a, b)


N = 1536


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
)py";

std::string Candidate(const std::string& forward_body) {
  return "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
         "    def __init__(self):\n        super().__init__()\n\n"
         "    def forward(self, A, s):\n        " + forward_body + "\n";
}

class VerifierTaskInputsTest : public testing::FunnelTest {};

TEST_F(VerifierTaskInputsTest, APlainNumberInputReachesTheCandidateAsANumber) {
  const v1::Verdict verdict =
      Verify(kScaleTask, Candidate("assert isinstance(s, float), type(s)\n        return A * s"));
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_PASSED) << Describe(verdict);
}

TEST_F(VerifierTaskInputsTest, ACandidateThatIgnoresTheNumberIsWrong) {
  const v1::Verdict verdict = Verify(kScaleTask, Candidate("return A * 3.0"));
  EXPECT_FALSE(verdict.correct());
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TINY_RUN) << Describe(verdict);
  EXPECT_THAT(LastStage(verdict).message(), HasSubstr("mismatch")) << Describe(verdict);
}

TEST_F(VerifierTaskInputsTest, TheTensorBesideTheNumberIsStillCheckedForMutation) {
  const v1::Verdict verdict = Verify(kScaleTask, Candidate("return A.mul_(s)"));
  EXPECT_FALSE(verdict.correct());
  EXPECT_TRUE(HasFlag(verdict, v1::HACK_INPUT_MUTATION)) << Describe(verdict);
}

TEST_F(VerifierTaskInputsTest, SetsThatOutgrowTheSharedBufferStillReachTheCandidate) {
  const std::string candidate =
      "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
      "    def forward(self, a, b):\n        return a[:, None] * b[None, :]\n";
  const v1::Verdict verdict = Verify(kOuterTask, candidate, [](v1::VerifierOptions& o) {
    o.mutable_multi_input()->set_max_set_bytes(1 << 20);
  });
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  const v1::Verdict wrong = Verify(
      kOuterTask, absl::StrReplaceAll(candidate, {{"b[None, :]", "(b[None, :] + 1e-2)"}}),
      [](v1::VerifierOptions& o) { o.mutable_multi_input()->set_max_set_bytes(1 << 20); });
  EXPECT_FALSE(wrong.correct()) << Describe(wrong);
}

}  // namespace
}  // namespace kforge
