// The funnel on a GPU with Triton candidates: the built-in tasks' reference
// solutions and correct kernels for KernelBench level-1 and level-2 tasks
// pass all five stages; GPU-only
// attacks fail with their reason, and the GPU stays usable after a kernel
// that never ends. Skips with the reason where there is no GPU or Triton.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
  EXPECT_GE(verdict.candidate_timing().trials(), 20);
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

// A verifier of the second GPU accepts a correct Triton kernel, timed
// against its baselines, from a candidate process started on demand: there
// each of the 4xH100 e2e job's verifiers but the first failed every Triton
// kernel ("Pointer argument (at 0) cannot be accessed from Triton (cpu
// tensor?)"), since Triton launches on the current device.
class SecondGpuTest : public testing::SecondGpuFunnelTest {};

TEST_F(SecondGpuTest, ATritonCandidateIsAcceptedOnAGpuOtherThanTheFirst) {
  for (int i = 0; i < 2; ++i) {  // the second in a process the first left behind
    const v1::Verdict verdict =
        Verify(BuiltinTask("level1/1_ReLU.py"), BuiltinTask("solutions/level1/1_ReLU.py"),
               [](v1::VerifierOptions& o) {
                 o.set_require_triton(true);
                 o.mutable_timing()->set_trials(20);
               });
    EXPECT_TRUE(verdict.correct()) << Describe(verdict);
    EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
    EXPECT_GT(verdict.eager_timing().mean_ms(), 0) << Describe(verdict);
    EXPECT_GT(verdict.speedup_vs_eager(), 0) << Describe(verdict);
  }
}

// The corpus of legitimate solutions (tasks/kernelbench-solutions), each on
// the KernelBench task of the same file name at its full size (input sets
// fitted to max_set_bytes): every one must be accepted, with no flag. This
// is the verifier's false-positive test. The torch.compile baseline is left
// out (it compiles each task for seconds) unless KFORGE_TEST_COMPILE_BASELINE
// is set; a line per solution goes to stdout for the benchmark notes.
std::vector<std::string> CorpusFiles() {
  std::vector<std::string> files;
  const std::filesystem::path root =
      std::filesystem::path(KFORGE_TEST_SOURCE_DIR) / "tasks/kernelbench-solutions";
  for (const char* level : {"level1", "level2"}) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(root / level, ec)) {
      if (entry.path().extension() == ".py") {
        files.push_back(absl::StrCat(level, "/", entry.path().filename().string()));
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

class CorpusSolutionTest : public VerifierGpuTest,
                           public ::testing::WithParamInterface<std::string> {};

TEST_P(CorpusSolutionTest, IsAcceptedOnItsTaskWithoutFlags) {
  const std::string task = SharedTask(GetParam());
  if (task.empty()) GTEST_SKIP() << "KernelBench tasks are absent (set KFORGE_KERNELBENCH_DIR)";
  const std::string code = ReadSource("tasks/kernelbench-solutions/" + GetParam());
  const bool compile = std::getenv("KFORGE_TEST_COMPILE_BASELINE") != nullptr;
  const v1::Verdict verdict = Verify(task, code, [&](v1::VerifierOptions& o) {
    o.set_require_triton(true);
    o.mutable_limits()->set_correctness_timeout_s(180);
    o.mutable_limits()->set_timing_timeout_s(180);
    o.mutable_timing()->set_trials(20);
    o.mutable_timing()->set_min_timed_ms(100);
    o.mutable_timing()->set_max_trials(5000);
    o.mutable_timing()->set_baseline_compile(compile);
    // The plausible bound judges the faster baseline; with eager alone it
    // would flag LayerNorm, whose corpus solution is a real 38x over eager
    // (eager normalises a 4M-element row in few blocks) and under the bound
    // over torch.compile (the GRPO-shaped batch, which times it, does not
    // flag it).
    if (!compile) o.mutable_timing()->set_max_plausible_speedup(100);
  });
  std::string stages;
  for (const v1::StageResult& stage : verdict.stages()) {
    absl::StrAppendFormat(&stages, " %s=%.2f", v1::Stage_Name(stage.stage()).substr(6),
                          stage.seconds());
  }
  // The fastest call on inputs never seen, beside the trials' median: the
  // time a speedup is computed from is never below it.
  double fresh_ms = 0;
  for (double ms : verdict.fresh_input_ms()) fresh_ms = fresh_ms == 0 ? ms : std::min(fresh_ms, ms);
  std::printf("corpus %-60s correct=%d eager=%.3fx compile=%.3fx cand_ms=%.4f med_ms=%.4f "
              "fresh_ms=%.4f own_share=%.2f total_s=%.2f%s\n",
              GetParam().c_str(), verdict.correct(), verdict.speedup_vs_eager(),
              verdict.speedup_vs_compile(), verdict.candidate_timing().mean_ms(),
              verdict.candidate_timing().median_ms(), fresh_ms,
              verdict.attribution().own_gpu_share(), verdict.total_seconds(), stages.c_str());
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_PASSED) << Describe(verdict);
  EXPECT_EQ(verdict.hack_flags_size(), 0) << Describe(verdict);
}

// A checkout without the corpus has no case to run, which is not a failure.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CorpusSolutionTest);
INSTANTIATE_TEST_SUITE_P(KernelBench, CorpusSolutionTest, ::testing::ValuesIn(CorpusFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return testing::FileParamName(info.param);
                         });

TEST_F(VerifierGpuTest, TensorArithmeticBehindADecoyKernelEarnsNoCredit) {
  // Attack (a) of the independent suite: a Triton kernel runs, its result
  // is dropped, and the output comes from tensor operators (no named torch
  // function for a static check to match).
  const v1::Verdict verdict =
      VerifyTriton(BuiltinTask("level1/1_ReLU.py"), "attack_decoy_tensor_arithmetic.py");
  EXPECT_FALSE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stages(0).outcome(), v1::OUTCOME_PASSED) << "passes the static check";
  EXPECT_TRUE(HasFlag(verdict, v1::HACK_TORCH_FALLBACK)) << Describe(verdict);
  EXPECT_THAT(LastStage(verdict).message(), HasSubstr("library compute")) << Describe(verdict);
}

TEST_F(VerifierGpuTest, PythonComputeOnTheHostBehindADecoyKernelEarnsNoCredit) {
  // No library kernel runs; the input's trip to the host and back does.
  const v1::Verdict verdict =
      VerifyTriton(BuiltinTask("level1/1_ReLU.py"), "attack_host_python_compute.py");
  EXPECT_FALSE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stages(0).outcome(), v1::OUTCOME_PASSED) << "passes the static check";
  EXPECT_TRUE(HasFlag(verdict, v1::HACK_TORCH_FALLBACK)) << Describe(verdict);
  EXPECT_THAT(LastStage(verdict).message(), HasSubstr("host")) << Describe(verdict);
}

TEST_F(VerifierGpuTest, ATritonKernelBehindAnImportGuardIsAccepted) {
  // Verdict (b) of the independent suite: an optional import wrapped in
  // try/except ImportError is not a fallback.
  const v1::Verdict verdict =
      VerifyTriton(BuiltinTask("level1/1_ReLU.py"), "legit_import_guard_relu.py");
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.hack_flags_size(), 0) << Describe(verdict);
}

TEST_F(VerifierGpuTest, ACandidateFastOnlyOnInputsItHasSeenIsFlagged) {
  // Caches its output by an input fingerprint and recomputes slowly on a
  // miss: right everywhere, fast only on the timing pool it has seen.
  const v1::Verdict verdict =
      VerifyTriton(BuiltinTask("level1/1_ReLU.py"), "attack_fingerprint_cache.py");
  EXPECT_TRUE(HasFlag(verdict, v1::HACK_RESULT_CACHING)) << Describe(verdict);
  EXPECT_NE(LastStage(verdict).outcome(), v1::OUTCOME_PASSED) << Describe(verdict);
}

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

TEST_F(VerifierGpuTest, ASmallCorrectKernelBesideAProcessKeepingTheGpuBusyIsNotSideStreamWork) {
  // `kforge local` on a node with few GPUs puts a verifier beside a rollout
  // worker or the learner. Their kernels make each of the candidate's calls
  // wait for a time slice before the GPU takes it up, which its events do
  // not see: on 4x H100 a correct 0.073 ms GELU kernel's host clock read
  // 0.23-1.52 ms, and beside this test's matmul loop 2.45 ms (the eager
  // reference's re-check led by 2.31 ms moments before). The host time now
  // starts at the end event (harness timing.py), with or without the
  // re-check's allowance.
  const std::string task = SharedTask("level1/19_ReLU.py");
  if (task.empty()) GTEST_SKIP() << "KernelBench tasks are absent (set KFORGE_KERNELBENCH_DIR)";
  const std::string ready = absl::StrCat(work_dir_, "/cotenant-ready");
  absl::StatusOr<std::unique_ptr<ChildProcess>> cotenant = ChildProcess::Spawn(
      {.argv = {python_, "-c",
                absl::StrCat("import torch\n"
                             "a = torch.randn(4096, 4096, device='cuda:0')\n"
                             "(a @ a).sum().item()\n"
                             "open('", ready, "', 'w').close()\n"
                             "while True:\n"
                             "    for _ in range(50): b = a @ a\n"
                             "    torch.cuda.synchronize()\n")}});
  ASSERT_TRUE(cotenant.ok()) << cotenant.status();
  for (int i = 0; i < 1200 && !std::filesystem::exists(ready); ++i) {
    ASSERT_FALSE((*cotenant)->Poll().has_value()) << "the busy process ended";
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(std::filesystem::exists(ready)) << "the busy process never started its loop";
  // The first verification measures the baselines; the rest re-check them.
  constexpr int kVerifications = 6;
  for (const bool from_recheck : {false, true}) {
    int correct = 0, side_stream = 0, failed_on_clocks = 0;
    std::string first_side_stream;
    for (int i = 0; i < kVerifications; ++i) {
      const v1::Verdict verdict =
          Verify(task, TestData("triton/kb_relu.py"), [&](v1::VerifierOptions& o) {
            o.set_require_triton(true);
            o.mutable_timing()->set_trials(20);
            o.mutable_timing()->set_host_gap_from_recheck(from_recheck);
          });
      ASSERT_TRUE(verdict.stage_reached() == v1::STAGE_TIMING) << Describe(verdict);
      correct += verdict.correct();
      if (verdict.correct() && LastStage(verdict).outcome() != v1::OUTCOME_PASSED) {
        ++failed_on_clocks;
      }
      if (HasFlag(verdict, v1::HACK_SIDE_STREAM)) {
        if (side_stream++ == 0) first_side_stream = LastStage(verdict).message();
      }
    }
    std::printf("host_gap_from_recheck %s beside a busy process: %d of %d correct, %d failed on "
                "the clocks, %d taken for side-stream work%s%s\n",
                from_recheck ? "on " : "off", correct, kVerifications, failed_on_clocks,
                side_stream, side_stream > 0 ? ": " : "", first_side_stream.c_str());
    EXPECT_EQ(correct, kVerifications);
    EXPECT_EQ(side_stream, 0) << first_side_stream;
  }
}

}  // namespace
}  // namespace kforge
