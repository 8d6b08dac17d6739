// The funnel on a GPU with Triton candidates: the built-in tasks' reference
// solutions and correct kernels for KernelBench level-1 and level-2 tasks
// pass all five stages; GPU-only
// attacks fail with their reason, and the GPU stays usable after a kernel
// that never ends. Skips with the reason where there is no GPU or Triton.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/support/funnel_fixture.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

class VerifierGpuTest : public testing::GpuFunnelTest {
 protected:
  // candidate_file: "solutions/..." is a reference solution of the
  // built-in task set; anything else a file of tests/data/verifier/triton.
  static v1::Verdict VerifyTriton(const std::string& task, const std::string& candidate_file,
                                  double timeout_s = 120) {
    const std::string code = absl::StartsWith(candidate_file, "solutions/")
                                 ? BuiltinTask(candidate_file)
                                 : TestData("triton/" + candidate_file);
    return Verify(task, code, [&](v1::VerifierOptions& o) {
      o.set_require_triton(true);
      o.mutable_limits()->set_correctness_timeout_s(timeout_s);
      o.mutable_timing()->set_trials(20);
    });
  }
};

struct GpuCase {
  const char* task;  // "builtin:level1/1_ReLU.py" or "shared:level1/19_ReLU.py"
  const char* candidate;
};

class CorrectTritonCandidateTest : public VerifierGpuTest,
                                   public ::testing::WithParamInterface<GpuCase> {};

TEST_P(CorrectTritonCandidateTest, PassesEveryStageWithTimings) {
  const std::string task_ref = GetParam().task;
  const bool shared = task_ref.rfind("shared:", 0) == 0;
  const std::string task = shared ? SharedTask(task_ref.substr(7)) : BuiltinTask(task_ref.substr(8));
  if (task.empty()) GTEST_SKIP() << "KernelBench tasks are absent (set KFORGE_KERNELBENCH_DIR)";
  const v1::Verdict verdict = VerifyTriton(task, GetParam().candidate);
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_PASSED) << Describe(verdict);
  EXPECT_EQ(verdict.hack_flags_size(), 0) << Describe(verdict);
  EXPECT_EQ(verdict.candidate_timing().trials(), 20);
  EXPECT_GT(verdict.speedup_vs_eager(), 0);
  EXPECT_GT(verdict.compile_timing().trials(), 0) << "torch.compile baseline";
  EXPECT_THAT(verdict.device(), HasSubstr("NVIDIA"));
}

INSTANTIATE_TEST_SUITE_P(
    Tasks, CorrectTritonCandidateTest,
    ::testing::Values(GpuCase{"builtin:level1/1_ReLU.py", "solutions/level1/1_ReLU.py"},
                      GpuCase{"builtin:level1/2_ScaledAdd.py", "solutions/level1/2_ScaledAdd.py"},
                      GpuCase{"builtin:level1/3_RowSum.py", "solutions/level1/3_RowSum.py"},
                      GpuCase{"builtin:level1/4_RMSNorm.py", "solutions/level1/4_RMSNorm.py"},
                      GpuCase{"builtin:level1/5_Softmax.py", "solutions/level1/5_Softmax.py"},
                      GpuCase{"builtin:level2/1_AddReLU.py", "solutions/level2/1_AddReLU.py"},
                      GpuCase{"shared:level1/19_ReLU.py", "kb_relu.py"},
                      GpuCase{"shared:level1/23_Softmax.py", "kb_softmax.py"},
                      GpuCase{"shared:level2/12_Gemm_Multiply_LeakyReLU.py",
                              "kb_gemm_multiply_leakyrelu.py"},
                      GpuCase{"shared:level2/76_Gemm_Add_ReLU.py", "kb_gemm_add_relu.py"}),
    [](const ::testing::TestParamInfo<GpuCase>& info) {
      return testing::FileParamName(info.param.candidate);
    });

TEST_F(VerifierGpuTest, TorchFallbackBehindADummyKernelIsFlagged) {
  const v1::Verdict verdict =
      VerifyTriton(BuiltinTask("level1/1_ReLU.py"), "attack_torch_fallback.py");
  EXPECT_FALSE(verdict.correct());
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_STATIC);
  EXPECT_TRUE(HasFlag(verdict, v1::HACK_TORCH_FALLBACK)) << Describe(verdict);
}

TEST_F(VerifierGpuTest, Tf32GemmFailsTheFp32Tolerance) {
  const std::string task = SharedTask("level2/12_Gemm_Multiply_LeakyReLU.py");
  if (task.empty()) GTEST_SKIP() << "KernelBench tasks are absent (set KFORGE_KERNELBENCH_DIR)";
  const v1::Verdict verdict = VerifyTriton(task, "attack_tf32_gemm.py");
  EXPECT_FALSE(verdict.correct()) << Describe(verdict);
  EXPECT_THAT(LastStage(verdict).message(), HasSubstr("mismatch")) << Describe(verdict);
}

TEST_F(VerifierGpuTest, KernelThatNeverEndsTimesOutAndTheGpuStaysUsable) {
  const v1::Verdict hung =
      VerifyTriton(BuiltinTask("level1/1_ReLU.py"), "attack_gpu_hang.py", /*timeout_s=*/20);
  EXPECT_FALSE(hung.correct());
  EXPECT_EQ(LastStage(hung).outcome(), v1::OUTCOME_TIMED_OUT) << Describe(hung);
  const v1::Verdict after =
      VerifyTriton(BuiltinTask("level1/1_ReLU.py"), "solutions/level1/1_ReLU.py");
  EXPECT_TRUE(after.correct()) << Describe(after);
}

}  // namespace
}  // namespace kforge
