// The verifier funnel on the CPU (require_triton off): plain-PyTorch
// candidates that are correct pass every stage and are timed; every attack in
// tests/data/verifier/cpu/ fails at the stage, with the outcome and hack flag,
// that catches it; and the shared funnel keeps serving after all of them.
//
// KernelBench tasks (../shared/kernelbench) are sized for an H100: a
// 4096 x 393216 ReLU input is 6.4 GB and a level-2 GEMM is 1024 x 8192 x 8192.
// Here each is verified with its size constants cut down (SharedTaskOnCpu);
// its Model, get_inputs and get_init_inputs are the task's own. Tests on
// KernelBench tasks skip when the folder is absent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/support/funnel_fixture.h"
#include "verifier_worker/funnel/verdict_cache.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;
using Tweak = std::function<void(v1::VerifierOptions&)>;

constexpr char kNoKernelBench[] = "KernelBench tasks are absent (set KFORGE_KERNELBENCH_DIR)";

// CPU sizes for the KernelBench tasks used here: {constant, new value}. Each
// constant must be assigned at the start of a line in the task.
const std::map<std::string, std::vector<std::pair<std::string, std::string>>>& CpuSizes() {
  static const auto* sizes = new std::map<std::string, std::vector<std::pair<std::string, std::string>>>{
      {"level1/19_ReLU.py", {{"batch_size", "64"}, {"dim", "4096"}}},
      {"level1/20_LeakyReLU.py", {{"batch_size", "64"}, {"dim", "4096"}}},
      {"level1/23_Softmax.py", {{"batch_size", "64"}, {"dim", "4096"}}},
      {"level1/36_RMSNorm_.py", {{"batch_size", "4"}, {"dim1", "32"}, {"dim2", "32"}}},
      {"level2/12_Gemm_Multiply_LeakyReLU.py",
       {{"batch_size", "64"}, {"in_features", "512"}, {"out_features", "512"}}},
      {"level2/57_Conv2d_ReLU_HardSwish.py",
       {{"batch_size", "4"}, {"out_channels", "16"}, {"height, width", "32, 32"}}},
      {"level2/76_Gemm_Add_ReLU.py",
       {{"batch_size", "64"}, {"in_features", "512"}, {"out_features", "512"}}},
  };
  return *sizes;
}

class VerifierFunnelTest : public testing::FunnelTest {
 protected:
  // A test data candidate made a new submission: a module-level constant
  // unique to this call changes its normalised source, so a verdict cached
  // by an earlier call (or repetition of the test) cannot answer it.
  static std::string FreshSubmission(const std::string& file) {
    static std::atomic<int> submissions{0};
    return absl::StrCat(TestData(file), "\n_submission = ", submissions.fetch_add(1), "\n");
  }
  // A KernelBench task with the size constants of CpuSizes(); "" when the
  // KernelBench folder is absent.
  static std::string SharedTaskOnCpu(const std::string& relative) {
    std::string source = SharedTask(relative);
    if (source.empty()) return "";
    auto sizes = CpuSizes().find(relative);
    if (sizes == CpuSizes().end()) {
      ADD_FAILURE() << relative << " has no CPU sizes in CpuSizes()";
      return source;
    }
    std::vector<std::string> lines = absl::StrSplit(source, '\n');
    for (const auto& [name, value] : sizes->second) {
      bool found = false;
      for (std::string& line : lines) {
        absl::string_view rest = line;
        if (!absl::ConsumePrefix(&rest, name)) continue;
        rest = absl::StripLeadingAsciiWhitespace(rest);
        if (!absl::StartsWith(rest, "=") || absl::StartsWith(rest, "==")) continue;
        line = absl::StrCat(name, " = ", value);
        found = true;
      }
      EXPECT_TRUE(found) << relative << " no longer assigns " << name << " at the start of a line";
    }
    return absl::StrJoin(lines, "\n");
  }

  // "builtin:level1/1_ReLU.py" (kforge-mini) or "shared:level1/19_ReLU.py"
  // (KernelBench, CPU-sized); "" when a shared task is absent.
  static std::string LoadTask(const std::string& ref) {
    if (absl::StartsWith(ref, "shared:")) return SharedTaskOnCpu(ref.substr(7));
    if (absl::StartsWith(ref, "builtin:")) return BuiltinTask(ref.substr(8));
    ADD_FAILURE() << "task reference " << ref << " is neither builtin: nor shared:";
    return "";
  }

  static v1::Verdict VerifyFile(const std::string& task, const std::string& file,
                                const Tweak& tweak = {}) {
    return Verify(task, TestData("cpu/" + file), tweak);
  }
};

// ---------------------------------------------------------------------------
// Correct candidates: plain PyTorch, written differently from the reference.
// ---------------------------------------------------------------------------

struct CorrectCase {
  const char* task;
  const char* file;
};

class CorrectCandidateTest : public VerifierFunnelTest,
                             public ::testing::WithParamInterface<CorrectCase> {};

TEST_P(CorrectCandidateTest, PassesEveryStageOnEveryInputSetWithoutFlags) {
  const std::string task = LoadTask(GetParam().task);
  if (task.empty()) GTEST_SKIP() << kNoKernelBench;
  const v1::Verdict verdict = VerifyFile(task, GetParam().file);
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_PASSED) << Describe(verdict);
  EXPECT_EQ(verdict.hack_flags_size(), 0) << Describe(verdict);
  ASSERT_EQ(verdict.stages_size(), 5) << Describe(verdict);
  for (const v1::StageResult& stage : verdict.stages()) {
    EXPECT_EQ(stage.outcome(), v1::OUTCOME_PASSED) << Describe(verdict);
  }
  // The tiny set plus at least min_input_sets (5) others, all passed.
  EXPECT_GE(verdict.input_sets_size(), 6) << Describe(verdict);
  bool saw_task_inputs = false;
  for (const v1::InputSetResult& set : verdict.input_sets()) {
    EXPECT_TRUE(set.passed()) << set.name() << ": " << set.message();
    saw_task_inputs = saw_task_inputs || set.name() == "task_inputs";
    // Where the time went: the round trip holds the candidate's calls.
    EXPECT_GT(set.seconds(), 0) << set.name();
    EXPECT_GT(set.call_seconds(), 0) << set.name();
    EXPECT_LE(set.call_seconds(), set.seconds()) << set.name();
    EXPECT_GE(set.compare_seconds(), 0) << set.name();
  }
  EXPECT_TRUE(saw_task_inputs) << Describe(verdict);
  EXPECT_EQ(verdict.device(), "cpu");
}

INSTANTIATE_TEST_SUITE_P(
    Tasks, CorrectCandidateTest,
    ::testing::Values(CorrectCase{"builtin:level1/1_ReLU.py", "relu_clamp.py"},
                      CorrectCase{"builtin:level1/2_ScaledAdd.py", "scaled_add.py"},
                      CorrectCase{"builtin:level1/3_RowSum.py", "row_sum.py"},
                      CorrectCase{"builtin:level1/4_RMSNorm.py", "rms_norm.py"},
                      CorrectCase{"builtin:level2/1_AddReLU.py", "add_relu.py"},
                      CorrectCase{"shared:level1/19_ReLU.py", "kb_relu.py"},
                      CorrectCase{"shared:level1/20_LeakyReLU.py", "kb_leaky_relu.py"},
                      CorrectCase{"shared:level1/23_Softmax.py", "kb_softmax.py"},
                      CorrectCase{"shared:level1/36_RMSNorm_.py", "kb_rms_norm.py"},
                      CorrectCase{"shared:level2/12_Gemm_Multiply_LeakyReLU.py",
                                  "kb_gemm_multiply_leakyrelu.py"},
                      CorrectCase{"shared:level2/57_Conv2d_ReLU_HardSwish.py",
                                  "kb_conv_relu_hardswish.py"},
                      CorrectCase{"shared:level2/76_Gemm_Add_ReLU.py", "kb_gemm_add_relu.py"}),
    [](const ::testing::TestParamInfo<CorrectCase>& info) {
      return testing::FileParamName(info.param.file);
    });

// The built-in task set's plain-PyTorch reference solutions (what `kforge
// local` warm-starts on without a GPU) pass the funnel they are trained for.
class BuiltinTorchSolutionTest : public VerifierFunnelTest,
                                 public ::testing::WithParamInterface<const char*> {};

TEST_P(BuiltinTorchSolutionTest, PassesEveryCorrectnessStage) {
  const std::string task = GetParam();
  const v1::Verdict verdict =
      Verify(BuiltinTask(task), BuiltinTask("solutions-torch/" + task));
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.hack_flags_size(), 0) << Describe(verdict);
}

INSTANTIATE_TEST_SUITE_P(KforgeMini, BuiltinTorchSolutionTest,
                         ::testing::Values("level1/1_ReLU.py", "level1/2_ScaledAdd.py",
                                           "level1/3_RowSum.py", "level1/4_RMSNorm.py",
                                           "level1/5_Softmax.py", "level2/1_AddReLU.py"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return testing::FileParamName(info.param);
                         });

TEST_F(VerifierFunnelTest, CorrectCandidateIsTimedAgainstTheEagerBaseline) {
  const v1::Verdict verdict = VerifyFile(BuiltinTask("level1/1_ReLU.py"), "relu_clamp.py");
  ASSERT_TRUE(verdict.correct()) << Describe(verdict);
  ASSERT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_PASSED) << Describe(verdict);
  EXPECT_EQ(verdict.candidate_timing().trials(), 10) << Describe(verdict);
  EXPECT_EQ(verdict.eager_timing().trials(), 10) << Describe(verdict);
  EXPECT_GT(verdict.candidate_timing().mean_ms(), 0) << Describe(verdict);
  EXPECT_GT(verdict.eager_timing().mean_ms(), 0) << Describe(verdict);
  EXPECT_GT(verdict.speedup_vs_eager(), 0) << Describe(verdict);
  EXPECT_FALSE(verdict.cached());
  // Where the time went, by part of each stage (StageResult.part_seconds).
  const std::map<v1::Stage, std::vector<std::string>> parts = {
      {v1::STAGE_COMPILE, {"compile_request", "sandbox"}},
      {v1::STAGE_TINY_RUN, {"compare"}},
      {v1::STAGE_MULTI_INPUT, {"compare", "sets"}},
      {v1::STAGE_TIMING, {"attribute", "baselines", "judge", "timed_runs"}}};
  for (const v1::StageResult& stage : verdict.stages()) {
    std::vector<std::string> names;
    for (const auto& [name, seconds] : stage.part_seconds()) {
      names.push_back(name);
      EXPECT_GE(seconds, 0) << name;
    }
    std::sort(names.begin(), names.end());
    auto expected = parts.find(stage.stage());
    EXPECT_EQ(names, expected == parts.end() ? std::vector<std::string>() : expected->second)
        << v1::Stage_Name(stage.stage());
  }
  EXPECT_GT(LastStage(verdict).part_seconds().at("timed_runs"), 0);
  EXPECT_GE(verdict.reference_seconds(), 0);
  EXPECT_LE(verdict.reference_seconds(), verdict.total_seconds());
}

// Stage 4 sends the next set before it compares the last one's outputs. A
// set that fails ends the stage there: the set already sent is not waited
// for (its process is killed), even when it would never answer.
TEST_F(VerifierFunnelTest, ASetThatFailsDoesNotWaitForTheSetSentAfterIt) {
  // Calls 1-3 are the tiny set and the task's own inputs (twice): right.
  // Call 4, the next set: wrong. Call 5, the set sent after it: never ends.
  const std::string candidate = R"(```python
import torch
import torch.nn as nn

CALLS = [0]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] == 4:
            return torch.clamp(x, min=0.0) + 1.0
        while CALLS[0] > 4:
            CALLS[0] += 1
        return torch.clamp(x, min=0.0)
```)";
  constexpr double kLimit = 120;
  const v1::Verdict verdict =
      Verify(BuiltinTask("level1/1_ReLU.py"), candidate, [](v1::VerifierOptions& o) {
        o.mutable_limits()->set_correctness_timeout_s(kLimit);
      });
  EXPECT_FALSE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_MULTI_INPUT) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_FAILED) << Describe(verdict);
  ASSERT_GE(verdict.input_sets_size(), 3) << Describe(verdict);
  EXPECT_FALSE(verdict.input_sets().rbegin()->passed()) << Describe(verdict);
  EXPECT_THAT(LastStage(verdict).message(),
              ::testing::HasSubstr(verdict.input_sets().rbegin()->name()));
  // Waiting for the hung set would have lasted the whole correctness limit.
  EXPECT_LT(verdict.total_seconds(), kLimit / 2) << Describe(verdict);
}

TEST_F(VerifierFunnelTest, ShortKernelsAreTimedUntilTheTimeBudgetIsMeasured) {
  // min_timed_ms = 200: a ReLU over the task's small input takes well under
  // a millisecond here, so each side gets more than the 10 trials asked
  // for, as many as 200 ms of trials (wall time, each trial's overhead
  // included) take, capped at max_trials = 2000. (At 50 ms, a host busy
  // starting a spare sandbox beside it once left 10 trials: the budget is
  // wall time.) The precision rule (target_rel_stderr) may go on past the
  // budget on a busy host (CI's failure at 384 trials, 51 ms); this test is
  // about the budget, so the rule is met by any spread (1) and judged every
  // trial (the median statistic: no trimmed-mean check every 16 trials).
  constexpr double kBudgetMs = 200;
  constexpr int kMaxTrials = 2000;
  const v1::Verdict verdict =
      VerifyFile(BuiltinTask("level1/1_ReLU.py"), "relu_clamp.py", [](v1::VerifierOptions& o) {
        o.mutable_timing()->set_min_timed_ms(kBudgetMs);
        o.mutable_timing()->set_max_trials(kMaxTrials);
        o.mutable_timing()->set_target_rel_stderr(1);
        o.mutable_timing()->set_statistic(v1::TIMING_MEDIAN);
      });
  ASSERT_TRUE(verdict.correct()) << Describe(verdict);
  ASSERT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_PASSED) << Describe(verdict);
  for (const v1::Timing* timing : {&verdict.candidate_timing(), &verdict.eager_timing()}) {
    EXPECT_GT(timing->trials(), 10) << Describe(verdict);
    EXPECT_LE(timing->trials(), kMaxTrials) << Describe(verdict);
    // No trial past the one that crossed the budget, unless the cap came
    // first: every trial's host time (call and synchronise) is part of its
    // wall time, so the trials before the last took under the budget of it.
    EXPECT_TRUE(timing->trials() >= kMaxTrials ||
                (timing->trials() - 1) * timing->host_mean_ms() < kBudgetMs)
        << Describe(verdict);
  }
}

TEST_F(VerifierFunnelTest, CandidateInsideAPythonFenceWithChatTextAroundItPasses) {
  const std::string completion = TestData("cpu/chat_fenced_relu.py");
  ASSERT_THAT(completion, HasSubstr("```python"));
  const v1::Verdict verdict = Verify(BuiltinTask("level1/1_ReLU.py"), completion);
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_PASSED) << Describe(verdict);
  // Only the code was verified, not the chat around it.
  EXPECT_TRUE(absl::StartsWith(verdict.extracted_code(), "import torch"))
      << verdict.extracted_code();
  EXPECT_THAT(verdict.extracted_code(), HasSubstr("class ModelNew"));
  EXPECT_THAT(verdict.extracted_code(), ::testing::Not(HasSubstr("```")));
  EXPECT_THAT(verdict.extracted_code(), ::testing::Not(HasSubstr("Sure!")));
}

TEST_F(VerifierFunnelTest, DuplicateSubmissionIsServedFromTheCacheTheSecondTime) {
  constexpr double kConfirmSpeedupBelow = 0.1;
  const Tweak cached = [](v1::VerifierOptions& o) {
    o.set_use_cache(true);
    o.mutable_timing()->set_confirm_speedup_below(kConfirmSpeedupBelow);
  };
  const std::string task = BuiltinTask("level1/1_ReLU.py");
  // A verdict that may be the verifier's load (a clock judgement failed on a
  // busy host: CI runs two tests at once on two cores) is rightly not cached
  // (ATimeoutIsServedFromTheCacheOnlyOnceItHappenedTwice); this test needs
  // one that is the candidate's, so a loaded first try is made again as a
  // new submission, a few times at most.
  std::string candidate;
  v1::Verdict first;
  for (int attempt = 0; attempt < 4; ++attempt) {
    candidate = FreshSubmission("cpu/relu_clamp.py");
    first = Verify(task, candidate, cached);
    if (!MayBeTheVerifiersLoad(first, kConfirmSpeedupBelow)) break;
  }
  ASSERT_TRUE(first.correct()) << Describe(first);
  ASSERT_FALSE(MayBeTheVerifiersLoad(first, kConfirmSpeedupBelow))
      << "every try failed a clock judgement: " << Describe(first);
  EXPECT_FALSE(first.cached()) << Describe(first);
  const v1::Verdict second = Verify(task, candidate, cached);
  EXPECT_TRUE(second.cached()) << Describe(second);
  EXPECT_TRUE(second.correct()) << Describe(second);
  EXPECT_EQ(second.stage_reached(), first.stage_reached());
  EXPECT_EQ(second.speedup_vs_eager(), first.speedup_vs_eager());
  // Reformatting and comments do not make it a new submission.
  const v1::Verdict reformatted =
      Verify(task, absl::StrCat("# the same candidate, reformatted\n\n", candidate), cached);
  EXPECT_TRUE(reformatted.cached()) << Describe(reformatted);
  // Without the cache it is verified again.
  const v1::Verdict uncached = Verify(task, candidate);
  EXPECT_FALSE(uncached.cached()) << Describe(uncached);
  EXPECT_TRUE(uncached.correct()) << Describe(uncached);
}

TEST_F(VerifierFunnelTest, ATimeoutIsServedFromTheCacheOnlyOnceItHappenedTwice) {
  // A timeout may be the verifier's load, not the candidate: a duplicate is
  // verified again rather than handed the first one's verdict. Timing out a
  // second time, it is the candidate's: later duplicates get that verdict
  // without costing the limit again.
  const std::string candidate = FreshSubmission("cpu/infinite_loop.py");
  const Tweak cached = [](v1::VerifierOptions& o) {
    o.set_use_cache(true);
    o.mutable_limits()->set_correctness_timeout_s(2);
  };
  const std::string task = BuiltinTask("level1/1_ReLU.py");
  const v1::Verdict first = Verify(task, candidate, cached);
  ASSERT_EQ(LastStage(first).outcome(), v1::OUTCOME_TIMED_OUT) << Describe(first);
  const v1::Verdict second = Verify(task, candidate, cached);
  EXPECT_FALSE(second.cached()) << Describe(second);
  EXPECT_EQ(LastStage(second).outcome(), v1::OUTCOME_TIMED_OUT) << Describe(second);
  const v1::Verdict third = Verify(task, candidate, cached);
  EXPECT_TRUE(third.cached()) << Describe(third);
  EXPECT_EQ(LastStage(third).outcome(), v1::OUTCOME_TIMED_OUT) << Describe(third);
  // The cached verdict costs its lookup, not the 2 s limit again, and
  // says so; its stages still tell how long the timed-out run took.
  EXPECT_GE(second.total_seconds(), 1.5) << Describe(second);
  EXPECT_LT(third.total_seconds(), 1.5) << Describe(third);
  EXPECT_EQ(third.device_wait_seconds(), 0);
  EXPECT_GE(LastStage(third).seconds(), 1.5) << Describe(third);
}

TEST_F(VerifierFunnelTest, AKernelFarSlowerThanEagerIsServedFromTheCacheOnlyOnceConfirmed) {
  // A correct kernel timed far slower than eager may have been timed under
  // another process's load (TimingProtocol.confirm_speedup_below): a
  // duplicate is verified again rather than inherit that speedup, and a
  // second verification at another moment makes it the kernel's own.
  const std::string candidate = FreshSubmission("cpu/relu_in_chunks.py");
  const Tweak cached = [](v1::VerifierOptions& o) { o.set_use_cache(true); };
  const std::string task = BuiltinTask("level1/1_ReLU.py");
  const v1::Verdict first = Verify(task, candidate, cached);
  ASSERT_TRUE(first.correct()) << Describe(first);
  ASSERT_GT(first.speedup_vs_eager(), 0) << Describe(first);
  ASSERT_LT(first.speedup_vs_eager(), 0.1) << "not slow enough to test the rule: " << Describe(first);
  const v1::Verdict second = Verify(task, candidate, cached);
  EXPECT_FALSE(second.cached()) << Describe(second);
  EXPECT_TRUE(second.correct()) << Describe(second);
  const v1::Verdict third = Verify(task, candidate, cached);
  EXPECT_TRUE(third.cached()) << Describe(third);
  EXPECT_EQ(third.speedup_vs_eager(), second.speedup_vs_eager()) << "the confirmed verdict";
  // With the confirmation off, the first verdict is every duplicate's.
  const Tweak unconfirmed = [](v1::VerifierOptions& o) {
    o.set_use_cache(true);
    o.mutable_timing()->set_confirm_speedup_below(0);
  };
  const std::string other = absl::StrCat(candidate, "_other = 1\n");
  EXPECT_FALSE(Verify(task, other, unconfirmed).cached());
  EXPECT_TRUE(Verify(task, other, unconfirmed).cached());
}

TEST_F(VerifierFunnelTest, AReferenceSlowerThanTheCandidatesLimitStillServesIt) {
  // The reference epoch is the task's, shared by all its candidates: its
  // limit is SandboxLimits.reference_timeout_s, not the correctness limit of
  // the candidate that happened to ask first. Here building the reference
  // Model alone outlasts that candidate's 2 s.
  std::string task = BuiltinTask("level1/1_ReLU.py");
  const std::string init = "        super().__init__()\n";
  ASSERT_NE(task.find(init), std::string::npos);
  task.replace(task.find(init), init.size(),
               init + "        import time\n        time.sleep(2.5)\n");
  const v1::Verdict verdict = VerifyFile(task, "relu_clamp.py", [](v1::VerifierOptions& o) {
    o.mutable_limits()->set_correctness_timeout_s(2);
  });
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
}

// ---------------------------------------------------------------------------
// Attacks caught by the static check (stage 1): the candidate never runs.
// ---------------------------------------------------------------------------

struct StaticAttack {
  const char* file;
  // The verdict must carry at least one of these; empty: no flag required.
  std::vector<v1::HackFlag> any_of_flags;
  // A substring of the static stage's message; "" for none.
  const char* message;
};

const std::vector<StaticAttack>& StaticAttacks() {
  static const auto* attacks = new std::vector<StaticAttack>{
      {"try_except_fallback.py", {v1::HACK_TRY_EXCEPT_FALLBACK}, "try/except"},
      {"reference_inheritance.py", {v1::HACK_REFERENCE_REUSE}, "Model"},
      {"sys_modules.py", {v1::HACK_INTROSPECTION}, "sys.modules"},
      {"thread_injection.py", {v1::HACK_CONCURRENCY}, "threading"},
      {"subprocess_shell.py", {v1::HACK_SUBPROCESS}, "subprocess"},
      {"fork_bomb.py", {v1::HACK_SUBPROCESS}, "fork"},
      {"side_stream.py", {v1::HACK_CONCURRENCY}, "Stream"},
      {"network_socket.py", {v1::HACK_NETWORK}, "socket"},
      {"file_write_outside.py", {v1::HACK_FILE_ACCESS}, "open"},
      {"storage_from_file.py", {v1::HACK_FILE_ACCESS}, "from_file"},
      // Passed the static check until torch.utils.data was denied; the
      // sandbox's process limit is test_sandbox.py's.
      {"dataloader_fork_bomb.py", {v1::HACK_CONCURRENCY}, "torch.utils.data"},
      {"monkeypatch_allclose.py", {v1::HACK_MONKEYPATCH}, "torch.allclose"},
      {"patched_timer.py", {v1::HACK_MONKEYPATCH, v1::HACK_INTROSPECTION}, "time.perf_counter"},
      {"tensor_subclass.py", {v1::HACK_TENSOR_SUBCLASS}, "torch.Tensor"},
      {"print_verdict.py", {v1::HACK_RESULT_FORGERY}, "PASSED"},
      {"early_exit.py", {v1::HACK_RESULT_FORGERY}, "os._exit"},
      // Denied names reached by other spellings: a module held as another
      // module's attribute, getattr under another name, code in a string.
      {"module_attribute_sys.py", {v1::HACK_INTROSPECTION}, "is sys.modules"},
      {"getattr_alias.py", {v1::HACK_INTROSPECTION}, "getattr used as a value"},
      {"annotation_eval.py", {v1::HACK_INTROSPECTION}, "annotation string"},
      // Rooted where no import names the object: judged by the names.
      {"unnamed_root_builtins.py", {v1::HACK_INTROSPECTION}, "can be module builtins"},
      {"unnamed_root_thread_pool.py", {v1::HACK_MONKEYPATCH}, "torch.set_num_threads"},
      {"no_code.txt", {}, "no code"},
      {"syntax_error.py", {}, "line 9"},
  };
  return *attacks;
}

class StaticAttackTest : public VerifierFunnelTest,
                         public ::testing::WithParamInterface<StaticAttack> {};

TEST_P(StaticAttackTest, IsRejectedByTheStaticStageBeforeItRuns) {
  const StaticAttack& attack = GetParam();
  const v1::Verdict verdict = VerifyFile(BuiltinTask("level1/1_ReLU.py"), attack.file);
  EXPECT_FALSE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_STATIC) << Describe(verdict);
  EXPECT_EQ(verdict.stages_size(), 1) << "later stages ran: " << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_FAILED) << Describe(verdict);
  if (!attack.any_of_flags.empty()) {
    bool flagged = false;
    for (v1::HackFlag flag : attack.any_of_flags) flagged = flagged || HasFlag(verdict, flag);
    EXPECT_TRUE(flagged) << "expected " << v1::HackFlag_Name(attack.any_of_flags.front())
                         << (attack.any_of_flags.size() > 1 ? " (or another listed flag)" : "")
                         << ": " << Describe(verdict);
    EXPECT_EQ(verdict.hack_flags_size(), verdict.hack_details_size()) << Describe(verdict);
  }
  EXPECT_THAT(LastStage(verdict).message(), HasSubstr(attack.message)) << Describe(verdict);
  EXPECT_EQ(verdict.candidate_timing().trials(), 0);
}

INSTANTIATE_TEST_SUITE_P(Attacks, StaticAttackTest, ::testing::ValuesIn(StaticAttacks()),
                         [](const ::testing::TestParamInfo<StaticAttack>& info) {
                           return testing::FileParamName(info.param.file);
                         });

TEST_F(VerifierFunnelTest, ChatAnswerWithoutCodeIsANoCodeFailureWithoutAFlag) {
  const v1::Verdict verdict = VerifyFile(BuiltinTask("level1/1_ReLU.py"), "no_code.txt");
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_STATIC) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_FAILED) << Describe(verdict);
  EXPECT_EQ(verdict.hack_flags_size(), 0) << Describe(verdict);
  EXPECT_THAT(LastStage(verdict).message(), HasSubstr("no code")) << Describe(verdict);
}

// ---------------------------------------------------------------------------
// Attacks that pass the static check (with require_triton off) and are caught
// when they run.
// ---------------------------------------------------------------------------

struct RuntimeAttack {
  const char* file;
  const char* task;
  // The stage that must catch it, inclusive range.
  v1::Stage first_stage;
  v1::Stage last_stage;
  std::vector<v1::StageOutcome> outcomes;
  std::vector<v1::HackFlag> any_of_flags;
  const char* message;
  Tweak tweak;
};

const std::vector<RuntimeAttack>& RuntimeAttacks() {
  const std::vector<v1::StageOutcome> failed = {v1::OUTCOME_FAILED};
  static const auto* attacks = new std::vector<RuntimeAttack>{
      // randn inputs: the negatives are wrong from the first (tiny) run.
      {"identity_relu.py", "builtin:level1/1_ReLU.py", v1::STAGE_TINY_RUN, v1::STAGE_TINY_RUN,
       failed, {}, "mismatch"},
      {"constant_output.py", "builtin:level1/1_ReLU.py", v1::STAGE_TINY_RUN,
       v1::STAGE_MULTI_INPUT, failed, {}, "mismatch"},
      {"partial_write_relu.py", "builtin:level1/1_ReLU.py", v1::STAGE_TINY_RUN,
       v1::STAGE_MULTI_INPUT, failed, {}, ""},
      {"unwritten_output.py", "builtin:level1/1_ReLU.py", v1::STAGE_TINY_RUN,
       v1::STAGE_MULTI_INPUT, failed, {}, ""},
      // Right on the tiny set and the task's inputs; the next set of the same
      // shape gets the task_inputs answer back.
      {"cached_output.py", "builtin:level1/1_ReLU.py", v1::STAGE_MULTI_INPUT,
       v1::STAGE_MULTI_INPUT, failed, {}, "mismatch"},
      {"input_mutation.py", "builtin:level1/1_ReLU.py", v1::STAGE_TINY_RUN,
       v1::STAGE_MULTI_INPUT, failed, {v1::HACK_INPUT_MUTATION}, "modified"},
      {"dynamic_subclass.py", "builtin:level1/1_ReLU.py", v1::STAGE_COMPILE,
       v1::STAGE_MULTI_INPUT, failed, {v1::HACK_OUTPUT_NOT_PLAIN_TENSOR}, "plain torch.Tensor"},
      // Right wherever the row length is a multiple of 512 (tiny, task,
      // larger, batch 1), wrong on the ragged set.
      {"exact_shape_only.py", "builtin:level1/1_ReLU.py", v1::STAGE_MULTI_INPUT,
       v1::STAGE_MULTI_INPUT, failed, {v1::HACK_EXACT_SHAPE_ONLY}, "ragged"},
      {"infinite_loop.py", "builtin:level1/1_ReLU.py", v1::STAGE_COMPILE, v1::STAGE_MULTI_INPUT,
       {v1::OUTCOME_TIMED_OUT}, {}, "",
       [](v1::VerifierOptions& o) { o.mutable_limits()->set_correctness_timeout_s(5); }},
      {"memory_bomb.py", "builtin:level1/1_ReLU.py", v1::STAGE_COMPILE, v1::STAGE_MULTI_INPUT,
       {v1::OUTCOME_FAILED, v1::OUTCOME_CRASHED}, {}, "",
       [](v1::VerifierOptions& o) { o.mutable_limits()->set_memory_bytes(536870912); }},
      {"wrong_dtype.py", "builtin:level1/1_ReLU.py", v1::STAGE_TINY_RUN, v1::STAGE_TINY_RUN,
       failed, {}, "dtype"},
      {"wrong_shape.py", "builtin:level1/1_ReLU.py", v1::STAGE_TINY_RUN, v1::STAGE_TINY_RUN,
       failed, {}, "shape"},
      // Both tell a timer's clone from a set by its _base; every call now
      // gets a copy, so they misbehave on correctness calls too. (The
      // call window and the timed-input check behind them are
      // test_run_time_facts.py's.)
      {"deferred_finalizer_relu.py", "builtin:level1/1_ReLU.py", v1::STAGE_COMPILE,
       v1::STAGE_MULTI_INPUT, failed, {}, ""},
      {"in_place_when_timed_relu.py", "builtin:level1/1_ReLU.py", v1::STAGE_COMPILE,
       v1::STAGE_MULTI_INPUT, failed, {v1::HACK_INPUT_MUTATION}, "modified"},
      // Its container's __iter__ would compute the output as the harness
      // unpacks it; the container's type is refused before that.
      {"lazy_output_container.py", "builtin:level1/1_ReLU.py", v1::STAGE_COMPILE,
       v1::STAGE_TINY_RUN, failed, {v1::HACK_OUTPUT_NOT_PLAIN_TENSOR}, "plain tuple or list"},
      // A plain tensor whose own attributes shadow its methods, which compute
      // the output when the harness calls them after the clock (1.53x here
      // before it was refused).
      {"output_with_its_own_methods.py", "builtin:level1/1_ReLU.py", v1::STAGE_COMPILE,
       v1::STAGE_TINY_RUN, failed, {v1::HACK_OUTPUT_NOT_PLAIN_TENSOR}, "attributes of its own"},
      // torch's FakeCopyMode, fetched by strings through functools and
      // pushed at load: correct, no flag, before it was refused.
      {"torch_mode_through_update_wrapper.py", "builtin:level1/1_ReLU.py", v1::STAGE_COMPILE,
       v1::STAGE_COMPILE, failed, {v1::HACK_INTROSPECTION}, "_subclasses"},
      // A library's callable bound as a class's __del__ after the class
      // statement, run with no frame of the candidate's (round 17).
      {"harness_closure_through_a_frameless_finalizer.py", "builtin:level1/1_ReLU.py",
       v1::STAGE_COMPILE, v1::STAGE_COMPILE, failed, {v1::HACK_INTROSPECTION},
       "_Fin.__del__ (functools.partial)"},
  };
  return *attacks;
}

class RuntimeAttackTest : public VerifierFunnelTest,
                          public ::testing::WithParamInterface<RuntimeAttack> {};

TEST_P(RuntimeAttackTest, PassesTheStaticCheckAndIsCaughtWhenItRuns) {
  const RuntimeAttack& attack = GetParam();
  const std::string task = LoadTask(attack.task);
  if (task.empty()) GTEST_SKIP() << kNoKernelBench;
  const v1::Verdict verdict = VerifyFile(task, attack.file, attack.tweak);
  EXPECT_FALSE(verdict.correct()) << "the attack got through: " << Describe(verdict);
  ASSERT_GE(verdict.stages_size(), 1) << Describe(verdict);
  EXPECT_EQ(verdict.stages(0).outcome(), v1::OUTCOME_PASSED)
      << "meant to pass the static check: " << Describe(verdict);
  EXPECT_GE(verdict.stage_reached(), attack.first_stage) << Describe(verdict);
  EXPECT_LE(verdict.stage_reached(), attack.last_stage) << Describe(verdict);
  EXPECT_THAT(attack.outcomes, ::testing::Contains(LastStage(verdict).outcome()))
      << Describe(verdict);
  if (!attack.any_of_flags.empty()) {
    bool flagged = false;
    for (v1::HackFlag flag : attack.any_of_flags) flagged = flagged || HasFlag(verdict, flag);
    EXPECT_TRUE(flagged) << "expected " << v1::HackFlag_Name(attack.any_of_flags.front()) << ": "
                         << Describe(verdict);
  }
  EXPECT_THAT(LastStage(verdict).message(), HasSubstr(attack.message)) << Describe(verdict);
  EXPECT_EQ(verdict.candidate_timing().trials(), 0) << "an incorrect candidate was timed";
}

INSTANTIATE_TEST_SUITE_P(Attacks, RuntimeAttackTest, ::testing::ValuesIn(RuntimeAttacks()),
                         [](const ::testing::TestParamInfo<RuntimeAttack>& info) {
                           return testing::FileParamName(info.param.file);
                         });

// ---------------------------------------------------------------------------
// Attacks on the timing: right outputs on every input set, and a speedup made
// by moving work out of the timed calls or by telling them apart. Caught
// by run-time facts of the timing stage, whatever the source looks like.
// ---------------------------------------------------------------------------

struct TimedAttack {
  const char* file;
  v1::HackFlag flag;
  const char* message;
};

class TimedAttackTest : public VerifierFunnelTest,
                        public ::testing::WithParamInterface<TimedAttack> {};

TEST_P(TimedAttackTest, IsRightOnEverySetAndFlaggedByTheTimingStage) {
  const TimedAttack& attack = GetParam();
  const v1::Verdict verdict = VerifyFile(BuiltinTask("level1/1_ReLU.py"), attack.file);
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_FAILED) << Describe(verdict);
  EXPECT_TRUE(HasFlag(verdict, attack.flag))
      << "expected " << v1::HackFlag_Name(attack.flag) << ": " << Describe(verdict);
  EXPECT_THAT(LastStage(verdict).message(), HasSubstr(attack.message)) << Describe(verdict);
}

INSTANTIATE_TEST_SUITE_P(
    Attacks, TimedAttackTest,
    ::testing::Values(
        // Skips the work on some timed calls: each must agree with the
        // first call on its set.
        TimedAttack{"skips_work_on_later_calls.py", v1::HACK_NONDETERMINISTIC,
                    "skipped the work"}),
    [](const ::testing::TestParamInfo<TimedAttack>& info) {
      return testing::FileParamName(info.param.file);
    });

TEST_F(VerifierFunnelTest, NoSpeedupIsEarnedBelowTheFastestCallOnInputsNeverSeen) {
  // A cache whose hits are padded to just over half a real call stays under
  // fresh_input_ratio_flag (a red team's: 1.85x over eager, unflagged): its
  // hits make the trials' time, its misses the fresh calls'. The time the
  // speedup is computed from is never below the fastest fresh call.
  const v1::Verdict verdict =
      VerifyFile(BuiltinTask("level1/1_ReLU.py"), "padded_cache_relu.py",
                 [](v1::VerifierOptions& o) { o.mutable_timing()->set_statistic(v1::TIMING_MEDIAN); });
  ASSERT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
  ASSERT_EQ(verdict.fresh_input_ms_size(), 2) << Describe(verdict);
  ASSERT_GT(verdict.speedup_vs_eager(), 0) << Describe(verdict);
  const double fastest_fresh =
      *std::min_element(verdict.fresh_input_ms().begin(), verdict.fresh_input_ms().end());
  const double charged = verdict.eager_timing().median_ms() / verdict.speedup_vs_eager();
  EXPECT_GE(charged, fastest_fresh * (1 - 1e-9))
      << "charged " << charged << " ms, trials' median " << verdict.candidate_timing().median_ms()
      << " ms: " << Describe(verdict);
}

TEST_F(VerifierFunnelTest, AValueKeyedCacheIsPaidAtItsMissesAndFlaggedWhereTheyStandOut) {
  // Fast on the clones of seen sets, slow on a fresh one. How far its misses
  // stand out depends on the host (on two busy cores a miss took 1.95x a
  // hit, under the flag's 2), but whatever they cost, they are what it is
  // paid by; and where they stand out beyond the flag, it is flagged.
  constexpr double kRatioFlag = 2, kFloorMs = 0.005;
  const v1::Verdict verdict = VerifyFile(
      BuiltinTask("level1/1_ReLU.py"), "value_fingerprint_cache.py", [](v1::VerifierOptions& o) {
        o.mutable_timing()->set_statistic(v1::TIMING_MEDIAN);
        o.mutable_timing()->set_fresh_input_ratio_flag(kRatioFlag);
        o.mutable_timing()->set_fresh_input_floor_ms(kFloorMs);
        // The judgement this test restates: the trials' median alone (the
        // trials before each miss are JudgeFreshTimesTest's).
        o.mutable_timing()->set_fresh_input_neighbours(0);
      });
  ASSERT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
  ASSERT_EQ(verdict.fresh_input_ms_size(), 2) << Describe(verdict);
  const double fastest_fresh =
      *std::min_element(verdict.fresh_input_ms().begin(), verdict.fresh_input_ms().end());
  const bool stands_out =
      fastest_fresh > kRatioFlag * std::max(verdict.candidate_timing().median_ms(), kFloorMs);
  EXPECT_EQ(HasFlag(verdict, v1::HACK_RESULT_CACHING), stands_out) << Describe(verdict);
  if (stands_out) {
    EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_FAILED) << Describe(verdict);
    EXPECT_THAT(LastStage(verdict).message(), HasSubstr("never seen")) << Describe(verdict);
  } else {
    ASSERT_GT(verdict.speedup_vs_eager(), 0) << Describe(verdict);
    const double charged = verdict.eager_timing().median_ms() / verdict.speedup_vs_eager();
    EXPECT_GE(charged, fastest_fresh * (1 - 1e-9)) << Describe(verdict);
  }
}

// Tests that need the machine's cores to themselves (ctest runs this suite
// alone: tests/CMakeLists.txt).
class SerialVerifierTest : public VerifierFunnelTest {
 protected:
  // `file` on the ReLU task, flagged HACK_CONCURRENCY by the timing stage
  // with `message`. Its candidates fork work onto torch's inter-op thread
  // from TorchScript, which on torch 1.13 aborts the candidate process now
  // and then before its timing (one run in four, in the correctness
  // stages): the attack fails there too, but what these tests are about is
  // the timing stage's CPU time, so a run that crashed is made again, up to
  // five times. So is one flagged by the other CPU-time judgement than the
  // one `message` names (the fresh-only fork once also pushed the whole
  // request to 1.10 CPUs, which is flagged first): a right refusal, but not
  // the judgement under test.
  void ExpectConcurrencyFlagged(const std::string& file, const std::string& message) {
    v1::Verdict verdict;
    for (int run = 0; run < 5; ++run) {
      verdict = VerifyFile(BuiltinTask("level1/1_ReLU.py"), file);
      const bool other_judgement = HasFlag(verdict, v1::HACK_CONCURRENCY) &&
                                   !absl::StrContains(LastStage(verdict).message(), message);
      if (LastStage(verdict).outcome() != v1::OUTCOME_CRASHED && !other_judgement) break;
    }
    EXPECT_EQ(verdict.stage_reached(), v1::STAGE_TIMING) << Describe(verdict);
    EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_FAILED) << Describe(verdict);
    EXPECT_TRUE(HasFlag(verdict, v1::HACK_CONCURRENCY)) << Describe(verdict);
    EXPECT_THAT(LastStage(verdict).message(), HasSubstr(message)) << Describe(verdict);
  }
};

TEST_F(SerialVerifierTest, WorkOnTorchsInterOpThreadIsSeenInTheProcesssCpuTime) {
  // TorchScript compiled from a string forks half of each call onto torch's
  // inter-op thread: no Python frame of the candidate's runs there and the
  // thread count is untouched, but the process used more CPU time than one
  // thread can in the wall time it took.
  ExpectConcurrencyFlagged("torchscript_fork_relu.py", "CPU time");
}

TEST_F(SerialVerifierTest, WorkOnAnotherThreadOnlyOnInputsNeverSeenIsSeenInThoseCallsCpuTime) {
  // A cache answers the sets it has seen; on the fresh-input calls alone
  // half the work goes to torch's inter-op thread, which the request's CPU
  // time barely shows. The cache may be flagged too; what this test is
  // about is the fresh calls' own CPU time.
  ExpectConcurrencyFlagged("fresh_only_fork_relu.py", "inputs it had never seen used");
}

TEST_F(VerifierFunnelTest, ReducedPrecisionIsJudgedByTheTasksToleranceOnTimedCallsToo) {
  // The harness judges each timed call's agreement with the first call by
  // the tolerance table the timing stage sends; without the table it falls
  // back to fp32's, and this candidate, within bf16's on every call, would
  // be flagged HACK_NONDETERMINISTIC although the task allows it.
  const std::string task = BuiltinTask("level1/1_ReLU.py");
  const v1::Verdict allowed =
      VerifyFile(task, "reduced_precision_relu.py", [](v1::VerifierOptions& o) {
        o.mutable_tolerances()->set_allow_reduced_precision(true);
      });
  EXPECT_TRUE(allowed.correct()) << Describe(allowed);
  EXPECT_EQ(allowed.stage_reached(), v1::STAGE_TIMING) << Describe(allowed);
  EXPECT_FALSE(HasFlag(allowed, v1::HACK_NONDETERMINISTIC)) << Describe(allowed);
  EXPECT_EQ(LastStage(allowed).outcome(), v1::OUTCOME_PASSED) << Describe(allowed);
  // The same candidate where fp32 is asked for fails before any timing.
  const v1::Verdict strict = VerifyFile(task, "reduced_precision_relu.py");
  EXPECT_FALSE(strict.correct()) << Describe(strict);
  EXPECT_NE(strict.stage_reached(), v1::STAGE_TIMING) << Describe(strict);
}

TEST_F(VerifierFunnelTest, IdentityReluPassesTheTasksNonNegativeInputsButNotASignedSet) {
  // KernelBench's 19_ReLU draws its inputs with torch.rand (all >= 0), where
  // the identity is a right answer; the funnel's other distributions are
  // signed.
  const std::string task = SharedTaskOnCpu("level1/19_ReLU.py");
  if (task.empty()) GTEST_SKIP() << kNoKernelBench;
  const v1::Verdict verdict = VerifyFile(task, "identity_relu.py");
  EXPECT_FALSE(verdict.correct()) << "the attack got through: " << Describe(verdict);
  EXPECT_EQ(verdict.stage_reached(), v1::STAGE_MULTI_INPUT) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_FAILED) << Describe(verdict);
  ASSERT_GE(verdict.input_sets_size(), 2) << Describe(verdict);
  EXPECT_EQ(verdict.input_sets(1).name(), "task_inputs") << Describe(verdict);
  EXPECT_TRUE(verdict.input_sets(1).passed()) << Describe(verdict);
  EXPECT_FALSE(verdict.input_sets().rbegin()->passed()) << Describe(verdict);
}

TEST_F(VerifierFunnelTest, MemoryBombIsKilledByItsCgroupWithTheReason) {
  if (!absl::StartsWith(funnel_->cgroup_report(), "cgroup")) {
    GTEST_SKIP() << "per-candidate cgroups are unusable here: " << funnel_->cgroup_report();
  }
  const v1::Verdict verdict =
      VerifyFile(BuiltinTask("level1/1_ReLU.py"), "memory_bomb.py", [](v1::VerifierOptions& o) {
        o.mutable_limits()->set_memory_bytes(1 << 30);
      });
  EXPECT_FALSE(verdict.correct()) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_CRASHED) << Describe(verdict);
  EXPECT_THAT(LastStage(verdict).message(), HasSubstr("killed by the memory limit of 1073741824"))
      << Describe(verdict);
}

TEST_F(VerifierFunnelTest, CandidateThatDisagreesWithItselfIsNotCorrect) {
  // Every third call is off by 1e-3: the tiny run (call 1) and the first run
  // on the task's inputs (call 2) are right, the repeat (call 3) is not.
  const v1::Verdict verdict = VerifyFile(BuiltinTask("level1/1_ReLU.py"), "nondeterministic.py");
  EXPECT_FALSE(verdict.correct()) << "the attack got through: " << Describe(verdict);
  EXPECT_GE(verdict.stage_reached(), v1::STAGE_TINY_RUN) << Describe(verdict);
  EXPECT_EQ(LastStage(verdict).outcome(), v1::OUTCOME_FAILED) << Describe(verdict);
  EXPECT_TRUE(HasFlag(verdict, v1::HACK_NONDETERMINISTIC) ||
              absl::StrContains(LastStage(verdict).message(), "mismatch"))
      << Describe(verdict);
}

TEST_F(VerifierFunnelTest, ExactShapeCandidatePassesTheTaskShapeBeforeItIsFlagged) {
  const v1::Verdict verdict = VerifyFile(BuiltinTask("level1/1_ReLU.py"), "exact_shape_only.py");
  EXPECT_FALSE(verdict.correct()) << Describe(verdict);
  bool task_inputs_passed = false;
  for (const v1::InputSetResult& set : verdict.input_sets()) {
    if (set.name() == "task_inputs") task_inputs_passed = set.passed();
  }
  EXPECT_TRUE(task_inputs_passed) << Describe(verdict);
  ASSERT_GE(verdict.input_sets_size(), 1) << Describe(verdict);
  EXPECT_FALSE(verdict.input_sets().rbegin()->passed()) << Describe(verdict);
  EXPECT_TRUE(HasFlag(verdict, v1::HACK_EXACT_SHAPE_ONLY)) << Describe(verdict);
}

// ---------------------------------------------------------------------------
// The shared funnel after every attack in a row.
// ---------------------------------------------------------------------------

TEST_F(VerifierFunnelTest, TheVerifierKeepsServingAfterEveryAttack) {
  const std::string relu = BuiltinTask("level1/1_ReLU.py");
  for (const StaticAttack& attack : StaticAttacks()) {
    const v1::Verdict verdict = VerifyFile(relu, attack.file);
    EXPECT_FALSE(verdict.correct()) << attack.file << ": " << Describe(verdict);
  }
  for (const RuntimeAttack& attack : RuntimeAttacks()) {
    const std::string task = LoadTask(attack.task);
    if (task.empty()) continue;
    const v1::Verdict verdict = VerifyFile(task, attack.file, attack.tweak);
    EXPECT_FALSE(verdict.correct()) << attack.file << ": " << Describe(verdict);
    EXPECT_NE(LastStage(verdict).outcome(), v1::OUTCOME_INTERNAL_ERROR)
        << attack.file << ": " << Describe(verdict);
  }
  const v1::Verdict drifting = VerifyFile(relu, "nondeterministic.py");
  EXPECT_FALSE(drifting.correct()) << Describe(drifting);
  EXPECT_TRUE(funnel_->healthy());
  const v1::Verdict after = VerifyFile(relu, "relu_clamp.py");
  EXPECT_TRUE(after.correct()) << Describe(after);
  EXPECT_EQ(after.stage_reached(), v1::STAGE_TIMING) << Describe(after);
  EXPECT_EQ(LastStage(after).outcome(), v1::OUTCOME_PASSED) << Describe(after);
  EXPECT_EQ(after.hack_flags_size(), 0) << Describe(after);
}

}  // namespace
}  // namespace kforge
