// `kforge eval --candidates` end to end: the real binary scores a folder of
// candidates for the built-in tasks (both naming schemes, a wrong candidate
// and a missing one) with its own in-process verifier, and writes a report
// whose figures match what those candidates deserve.
#include <filesystem>
#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"
#include "kforge/v1/eval.pb.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kSource = KFORGE_TEST_SOURCE_DIR;

struct Finished {
  int code = -1;
  std::string output;  // stdout and stderr
};

absl::StatusOr<Finished> RunKforge(std::vector<std::string> args,
                                   std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), testing::BinaryPath("kforge"));
  auto child = ChildProcess::Spawn({.argv = args, .env = std::move(env), .capture_output = true});
  if (!child.ok()) return child.status();
  absl::StatusOr<ExitInfo> exit = (*child)->WaitFor(absl::Seconds(240));
  if (!exit.ok()) return exit.status();
  return Finished{exit->exited ? exit->code : -1, (*child)->output()};
}

TEST(EvalCommandTest, ScoresAFolderOfCandidatesAndWritesTheReport) {
  testing::TempDir dir;
  const fs::path candidates = dir.Sub("candidates");
  fs::create_directories(candidates / "level1");
  fs::create_directories(candidates / "level2");
  const fs::path cpu = kSource / "tests/data/verifier/cpu";
  fs::copy_file(cpu / "relu_clamp.py", candidates / "level1/1_ReLU.py");
  // KernelBench's run naming: a second, wrong sample of task 1 and task 4.
  fs::copy_file(cpu / "identity_relu.py", candidates / "level_1_problem_1_sample_1_kernel.py");
  fs::copy_file(cpu / "rms_norm.py", candidates / "level_1_problem_4_sample_0_kernel.py");
  fs::copy_file(cpu / "scaled_add.py", candidates / "level1/2_ScaledAdd.py");
  fs::copy_file(cpu / "add_relu.py", candidates / "level2/1_AddReLU.py");
  // level1/3_RowSum and level1/5_Softmax have no candidate.

  auto exit = RunKforge({"eval", "--candidates=" + candidates.string(),
                         "--tasks=" + (kSource / "tasks/kforge-mini").string(),
                         "--require_triton=false", "--out=" + dir.Sub("out")});
  ASSERT_TRUE(exit.ok()) << exit.status();
  ASSERT_EQ(exit->code, 0) << exit->output;
  absl::StatusOr<std::string> json = ReadFileToString(dir.Sub("out/report.json"));
  ASSERT_TRUE(json.ok()) << json.status();
  v1::EvalReport report;
  ASSERT_TRUE(ParseJsonMessage(*json, &report).ok());
  EXPECT_EQ(report.overall().tasks(), 6);
  EXPECT_EQ(report.overall().samples(), 7);
  EXPECT_NEAR(report.overall().correct_rate(), 4.0 / 7.0, 1e-9);
  ASSERT_EQ(report.levels_size(), 2);
  EXPECT_NEAR(report.levels(0).pass_at_k().at(1), (0.5 + 1 + 0 + 1 + 0) / 5.0, 1e-9);
  EXPECT_NEAR(report.levels(0).fast_p().at("0"), 0.6, 1e-9);
  for (const v1::TaskEval& task : report.task_results()) {
    if (task.task_id() == "level1/3_RowSum") {
      EXPECT_EQ(task.correct(), 0);
      EXPECT_THAT(task.first_failure(), HasSubstr("no candidate file"));
    }
    if (task.task_id() == "level1/1_ReLU") {
      EXPECT_EQ(task.samples(), 2);
      EXPECT_EQ(task.correct(), 1);
    }
  }
  EXPECT_TRUE(fs::exists(dir.Sub("out/report.md")));
  // LibTorch 1.13 has no torch.compile: that baseline never ran, and the
  // table says so instead of printing a speedup of 0.
  EXPECT_EQ(report.overall().geomean_speedup_vs_compile(), 0);
  EXPECT_THAT(exit->output, HasSubstr("| n/a | "));
  EXPECT_THAT(exit->output, ::testing::Not(HasSubstr("0.00x")));
  absl::StatusOr<std::string> svg = ReadFileToString(dir.Sub("out/speedup_histogram.svg"));
  ASSERT_TRUE(svg.ok());
  EXPECT_THAT(*svg, HasSubstr("<svg"));
  // The curves beside it: one series per level and overall, each drawn.
  for (const char* chart : {"out/pass_at_k.svg", "out/fast_p.svg"}) {
    absl::StatusOr<std::string> text = ReadFileToString(dir.Sub(chart));
    ASSERT_TRUE(text.ok()) << chart << ": " << text.status();
    EXPECT_EQ(text->rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << chart;
    EXPECT_THAT(*text, HasSubstr("</svg>")) << chart;
    for (const char* series : {"level 1", "level 2", "overall"}) {
      EXPECT_THAT(*text, HasSubstr(absl::StrCat("data-series=\"", series, "\" points=\"")))
          << chart << " lacks " << series;
    }
  }
}

// Multi-turn candidates (issue 24), KernelBench's naming with the turn:
// task 1 has a wrong first answer revised to a right one, task 2 a right
// first answer. By turn 1 one task of two is solved, by turn 2 both.
TEST(EvalCommandTest, MultiTurnCandidatesAreReportedByTurn) {
  testing::TempDir dir;
  const fs::path candidates = dir.Sub("candidates");
  fs::create_directories(candidates);
  const fs::path cpu = kSource / "tests/data/verifier/cpu";
  fs::copy_file(cpu / "identity_relu.py", candidates / "level_1_problem_1_sample_0_turn_0_kernel.py");
  fs::copy_file(cpu / "relu_clamp.py", candidates / "level_1_problem_1_sample_0_turn_1_kernel.py");
  fs::copy_file(cpu / "scaled_add.py", candidates / "level_1_problem_2_sample_0_turn_0_kernel.py");
  fs::create_directories(dir.Sub("tasks/level1"));
  for (const char* task : {"1_ReLU.py", "2_ScaledAdd.py"}) {
    fs::copy_file(kSource / "tasks/kforge-mini/level1" / task, dir.Sub("tasks/level1") + "/" + task);
  }
  auto exit = RunKforge({"eval", "--candidates=" + candidates.string(),
                         "--tasks=" + dir.Sub("tasks"), "--require_triton=false", "--json"});
  ASSERT_TRUE(exit.ok()) << exit.status();
  ASSERT_EQ(exit->code, 0) << exit->output;
  const size_t json_start = exit->output.find("{\n");
  ASSERT_NE(json_start, std::string::npos) << exit->output;
  v1::EvalReport report;
  ASSERT_TRUE(ParseJsonMessage(exit->output.substr(json_start), &report).ok()) << exit->output;
  ASSERT_EQ(report.turns_size(), 2) << exit->output;
  EXPECT_DOUBLE_EQ(report.turns(0).overall().pass_at_k().at(1), 0.5);
  EXPECT_DOUBLE_EQ(report.turns(0).overall().fast_p().at("0"), 0.5);
  EXPECT_DOUBLE_EQ(report.turns(1).overall().pass_at_k().at(1), 1.0);
  EXPECT_DOUBLE_EQ(report.turns(1).overall().fast_p().at("0"), 1.0);
  EXPECT_EQ(report.overall().samples(), 2);  // two trajectories, not three files
  EXPECT_DOUBLE_EQ(report.overall().correct_rate(), 1.0);
}

TEST(EvalCommandTest, SamplesTheTinyModelOnTheBuiltInTasksAndScoresEveryCompletion) {
  testing::TempDir dir;
  auto tiny = RunKforge({"tiny-model", dir.Sub("tiny")});
  ASSERT_TRUE(tiny.ok() && tiny->code == 0);
  auto exit = RunKforge({"eval", "--model=" + dir.Sub("tiny"),
                         "--tasks=" + (kSource / "tasks/kforge-mini").string(), "--samples=2",
                         "--max_new_tokens=16", "--require_triton=false", "--json"});
  ASSERT_TRUE(exit.ok()) << exit.status();
  ASSERT_EQ(exit->code, 0) << exit->output;
  v1::EvalReport report;
  // --json prints the report on stdout, after the progress lines on stderr.
  const std::string& out = exit->output;
  ASSERT_TRUE(ParseJsonMessage(out.substr(out.find('{')), &report).ok()) << out;
  EXPECT_EQ(report.overall().tasks(), 6);
  EXPECT_EQ(report.overall().samples(), 12);
  EXPECT_TRUE(report.overall().pass_at_k().contains(2));
  // A random tiny model writes no kernel: every sample fails with a reason.
  EXPECT_EQ(report.overall().correct_rate(), 0.0);
  for (const v1::TaskEval& task : report.task_results()) {
    EXPECT_EQ(task.samples(), 2) << task.task_id();
    EXPECT_FALSE(task.first_failure().empty()) << task.task_id();
  }
}

// --turns with --model: every trajectory the random model fails goes on to
// the next turn with the verifier's feedback in its prompt, up to --turns;
// the report counts trajectories, not turns, and has a row per turn.
TEST(EvalCommandTest, SamplesFollowUpTurnsWithTheVerifiersFeedback) {
  testing::TempDir dir;
  auto tiny = RunKforge({"tiny-model", dir.Sub("tiny")});
  ASSERT_TRUE(tiny.ok() && tiny->code == 0);
  auto exit = RunKforge({"eval", "--model=" + dir.Sub("tiny"),
                         "--tasks=" + (kSource / "tasks/kforge-mini").string(), "--levels=1",
                         "--samples=2", "--turns=3", "--max_new_tokens=16",
                         "--require_triton=false", "--json"});
  ASSERT_TRUE(exit.ok()) << exit.status();
  ASSERT_EQ(exit->code, 0) << exit->output;
  const std::string& out = exit->output;
  EXPECT_THAT(out, HasSubstr("turn 3"));  // the progress line of the third round
  v1::EvalReport report;
  ASSERT_TRUE(ParseJsonMessage(out.substr(out.find("{\n")), &report).ok()) << out;
  const int tasks = report.overall().tasks();
  ASSERT_GT(tasks, 0);
  EXPECT_EQ(report.overall().samples(), 2 * tasks);  // trajectories
  ASSERT_EQ(report.turns_size(), 3) << out;
  for (const auto& turn : report.turns()) {
    EXPECT_EQ(turn.overall().pass_at_k().at(1), 0.0);
  }
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"eval", "--candidates=" + dir.Sub("tiny"), "--turns=2"},
        std::vector<std::string>{"eval", "--model=" + dir.Sub("tiny"), "--turns=9"}}) {
    auto refused = RunKforge(bad);
    ASSERT_TRUE(refused.ok());
    EXPECT_EQ(refused->code, 2) << refused->output;
    EXPECT_THAT(refused->output, HasSubstr("--turns"));
  }
}

TEST(EvalCommandTest, WithoutTasksItReadsKernelBenchWhereTheLookupFindsIt) {
  testing::TempDir dir;
  fs::create_directories(dir.Sub("candidates"));
  // KFORGE_KERNELBENCH_DIR comes first; the built-in set has the same layout.
  const std::string tasks = (kSource / "tasks/kforge-mini").string();
  auto exit = RunKforge({"eval", "--candidates=" + dir.Sub("candidates"), "--levels=2",
                         "--require_triton=false"},
                        {{"KFORGE_KERNELBENCH_DIR", tasks}});
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->code, 0) << exit->output;
  EXPECT_THAT(exit->output, HasSubstr("tasks from " + tasks + " (KFORGE_KERNELBENCH_DIR)"));
  EXPECT_THAT(exit->output, HasSubstr("| all | 1 | 1 |"));

  auto nowhere = RunKforge({"eval", "--candidates=" + dir.Sub("candidates")},
                           {{"KFORGE_KERNELBENCH_DIR", dir.Sub("none")}});
  ASSERT_TRUE(nowhere.ok()) << nowhere.status();
  EXPECT_EQ(nowhere->code, 2);
  EXPECT_THAT(nowhere->output, HasSubstr(dir.Sub("none") + " holds no level1/"));
  EXPECT_THAT(nowhere->output, HasSubstr("scripts/fetch-kernelbench.sh"));
}

TEST(EvalCommandTest, BadArgumentsExitWithCode2NamingThem) {
  auto missing = RunKforge({"eval", "--tasks=/nonexistent"});  // neither --candidates nor --model
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->code, 2);
  auto no_folder = RunKforge({"eval", "--candidates=/nonexistent/c", "--tasks=/nonexistent/t"});
  ASSERT_TRUE(no_folder.ok());
  EXPECT_EQ(no_folder->code, 2);
}

}  // namespace
}  // namespace kforge
