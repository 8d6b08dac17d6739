// `kforge local` starts the whole mesh, reports it SERVING, and Ctrl-C stops
// every service it started.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/client/rpc_client.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"
#include "kforge/v1/job_service.grpc.pb.h"
#include "kforge/v1/learner_state.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "tests/support/fixtures.h"
#include "tests/support/mesh.h"
#include "tests/support/temp_dir.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

// rsvg-convert on PATH, as the learner looks for it; empty when absent.
std::string FindRsvgConvert() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path == nullptr ? "" : path, ':')) {
    const std::string candidate = absl::StrCat(dir, "/rsvg-convert");
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

bool IsRunning(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

// `kforge local --serve` with `verifiers` verifiers in dir/run, once it
// says every service is SERVING (ASSERTs inside: call through
// ASSERT_NO_FATAL_FAILURE).
void StartServing(const testing::TempDir& dir, int verifiers,
                  absl::StatusOr<std::unique_ptr<ChildProcess>>* local,
                  const std::vector<std::string>& more_flags = {}) {
  std::vector<std::string> argv = {testing::BinaryPath("kforge"), "local", "--learner_port=0",
                                   absl::StrCat("--verifiers=", verifiers), "--serve",
                                   "--run_dir=" + dir.Sub("run")};
  argv.insert(argv.end(), more_flags.begin(), more_flags.end());
  *local = ChildProcess::Spawn({.argv = argv, .capture_output = true});
  ASSERT_TRUE(local->ok()) << local->status();
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!absl::StrContains((**local)->output(), "all services SERVING")) {
    ASSERT_LT(absl::Now(), deadline) << (**local)->output();
    auto exit = (**local)->WaitFor(absl::Milliseconds(100));
    ASSERT_FALSE(exit.ok()) << "kforge local exited early: " << (**local)->output();
  }
}

TEST(KforgeLocalTest, StartsEveryServiceAndCtrlCStopsThemAll) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> local;
  const std::string rollout_config = dir.Sub("rollout.json");
  std::ofstream(rollout_config) << R"({"verifier_affinity_slack": 7})";
  ASSERT_NO_FATAL_FAILURE(StartServing(dir, 2, &local,
                                       {"--verifier_slots=3", "--rollout_config=" + rollout_config}));
  const std::string output = (*local)->output();
  for (const char* name : {"learner", "verifier-0", "verifier-1", "rollout-0"}) {
    EXPECT_THAT(output, HasSubstr(name));
  }
  // --verifier_slots reaches each verifier: that many candidates at once,
  // that many sandboxes kept ready.
  EXPECT_THAT(output, HasSubstr("2 verifier(s) checking 3 candidates at once each"));
  for (const char* name : {"verifier-0", "verifier-1"}) {
    auto log = ReadFileToString(dir.Sub(absl::StrCat("run/", name, ".log")));
    ASSERT_TRUE(log.ok()) << log.status();
    EXPECT_THAT(*log, ::testing::ContainsRegex("funnel ready[^\n]* max_concurrent=3 spare_sandboxes=3"))
        << name;
  }
  // --rollout_config reaches each rollout worker.
  auto rollout_log = ReadFileToString(dir.Sub("run/rollout-0.log"));
  ASSERT_TRUE(rollout_log.ok()) << rollout_log.status();
  EXPECT_THAT(*rollout_log, HasSubstr("verifier_affinity_slack=7"));
  std::vector<int> pids;
  for (const char* name : {"learner", "verifier-0", "verifier-1", "rollout-0"}) {
    v1::ServingPorts ports;
    auto json = ReadFileToString(dir.Sub(std::string("run/") + name + ".ports"));
    ASSERT_TRUE(json.ok()) << json.status();
    ASSERT_TRUE(ParseJsonMessage(*json, &ports).ok());
    EXPECT_TRUE(WaitForServing(MakeChannel("127.0.0.1:" + std::to_string(ports.grpc_port())),
                               absl::Seconds(5))
                    .ok())
        << name;
    pids.push_back(ports.pid());
  }

  (*local)->Signal(SIGINT);
  auto exit = (*local)->WaitFor(absl::Seconds(60));
  ASSERT_TRUE(exit.ok()) << (*local)->output();
  EXPECT_TRUE(exit->exited);
  EXPECT_EQ(exit->code, 0) << (*local)->output();
  EXPECT_THAT((*local)->output(), HasSubstr("stopped learner"));
  for (int pid : pids) EXPECT_FALSE(IsRunning(pid)) << "service pid " << pid << " survived";
}

// A service that does not exit on SIGTERM is killed once --stop_grace_s
// has passed: here a verifier stopped (SIGSTOP) so it cannot drain, and a
// grace of 1 s, well inside the 10 s the test waits (the default is 15 s).
TEST(KforgeLocalTest, AServiceThatWillNotStopIsKilledAfterTheStopGrace) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> local;
  ASSERT_NO_FATAL_FAILURE(StartServing(dir, 1, &local, {"--stop_grace_s=1"}));
  v1::ServingPorts ports;
  auto json = ReadFileToString(dir.Sub("run/verifier-0.ports"));
  ASSERT_TRUE(json.ok()) << json.status();
  ASSERT_TRUE(ParseJsonMessage(*json, &ports).ok());
  ASSERT_EQ(kill(ports.pid(), SIGSTOP), 0);
  (*local)->Signal(SIGINT);
  auto exit = (*local)->WaitFor(absl::Seconds(10));
  if (!exit.ok()) kill(ports.pid(), SIGKILL);  // leave nothing behind on failure
  ASSERT_TRUE(exit.ok()) << "still stopping after 10 s: " << (*local)->output();
  EXPECT_THAT((*local)->output(), ::testing::ContainsRegex("stopped verifier-0 +\\(killed by signal 9"));
  EXPECT_THAT((*local)->output(), HasSubstr("stopped learner"));
  EXPECT_FALSE(IsRunning(ports.pid()));
}

TEST(KforgeLocalTest, AServiceThatCannotStartIsReportedWithItsLog) {
  testing::TempDir dir;
  auto local = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local",
                                             "--learner_port=0", "--python=/nonexistent/py",
                                             "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(local.ok());
  auto exit = (*local)->WaitFor(absl::Seconds(120));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 1);
  EXPECT_THAT((*local)->output(), HasSubstr("verifier-0 exited (exit code 2)"));
  EXPECT_THAT((*local)->output(), HasSubstr("/nonexistent/py"));
}

// A job small enough for CI: two warm-start steps, three GRPO steps of two
// groups of two samples against the real funnel. The model is left to
// kforge local (its tiny model).
// Softmax is held out and evaluated (greedy, one sample) every two steps.
constexpr const char* kShortJob = R"({
  "tasks": {"builtin": "kforge-mini", "solutions_dir": "solutions-torch",
            "heldout": ["level1/5_Softmax"]},
  "eval": {"every_steps": 2},
  "warm_start_steps": 2, "total_steps": 3, "prompts_per_step": 2,
  "grpo": {"group_size": 2}, "sampling": {"max_new_tokens": 24},
  "optimizer": {"batch_size": 4, "micro_batch_size": 2, "bf16": false},
  "verifier": {"require_triton": false, "timing": {"enabled": false}},
  "checkpoint": {"every_steps": 2}, "max_staleness": 1
})";

std::string WriteJob(const testing::TempDir& dir, const std::string& json) {
  const std::string path = dir.Sub("job.json");
  std::ofstream(path) << json;
  return path;
}

// Waits for `kforge local` to exit; its output on failure.
ExitInfo Finish(ChildProcess& local, absl::Duration limit) {
  auto exit = local.WaitFor(limit);
  EXPECT_TRUE(exit.ok()) << "kforge local still running: " << local.output();
  if (!exit.ok()) {
    local.Signal(SIGKILL);
    return {.exited = false, .code = -1};
  }
  return *exit;
}

// `kforge local --job` with `job_json` in dir/run; its output, once it
// exited 0 within 240 s.
void RunJobToTheEnd(const testing::TempDir& dir, const std::string& job_json, std::string* output) {
  auto local = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local",
                                             "--learner_port=0", "--job=" + WriteJob(dir, job_json),
                                             "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(local.ok()) << local.status();
  const ExitInfo exit = Finish(**local, absl::Seconds(240));
  *output = (*local)->output();
  ASSERT_EQ(exit.code, 0) << *output;
}

TEST(KforgeLocalTest, RunsAJobToTheEndWithProgressAndASummary) {
  testing::TempDir dir;
  std::string output;
  ASSERT_NO_FATAL_FAILURE(RunJobToTheEnd(dir, kShortJob, &output));
  EXPECT_THAT(output, HasSubstr("submitted job-000001"));
  EXPECT_THAT(output, HasSubstr("warm start  loss"));
  EXPECT_THAT(output, HasSubstr("step    5/5"));
  EXPECT_THAT(output, HasSubstr("JOB_SUCCEEDED"));
  EXPECT_THAT(output, HasSubstr("stopped learner"));
  // The job's log lines, as they came: the verifier warm-up's report (every
  // built-in reference solution accepted) and the checkpoints.
  std::smatch warm_up;
  ASSERT_TRUE(std::regex_search(
      output, warm_up,
      std::regex("kforge local: job log: verifier warm-up: ([0-9]+) of ([0-9]+) training tasks' "
                 "reference solutions verified correct")))
      << output;
  EXPECT_EQ(warm_up[1], warm_up[2]);
  EXPECT_THAT(output, HasSubstr("kforge local: job log: checkpoint written: "));
  // The held-out rounds of steps 2 and 4 came back and were summarised.
  auto log = ReadFileToString(dir.Sub("run/learner.log"));
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, ::testing::ContainsRegex("held-out evaluation[^\n]* step=2 tasks=1 "));
  EXPECT_THAT(*log, ::testing::ContainsRegex("held-out evaluation[^\n]* step=4 tasks=1 "));
  // Each names the policy versions that answered it (at or after its step's).
  EXPECT_THAT(*log, ::testing::ContainsRegex("held-out evaluation[^\n]* step=4 [^\n]*versions=[2-5]\\.\\.[2-5]"));
  // The final checkpoint is a Hugging Face folder a rollout worker can load.
  const std::string ckpt = dir.Sub("run/state/jobs/job-000001/checkpoints/step-00000005");
  EXPECT_THAT(output, HasSubstr(ckpt));
  for (const char* file : {"config.json", "tokenizer.json", "model.safetensors",
                           "optimizer.safetensors", "trainer_state.json"}) {
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(ckpt) / file)) << file;
  }
  // The checkpoint keeps the curves' data for a restarted learner: one pass
  // rate per step beside the rewards.
  auto state_json = ReadFileToString(ckpt + "/trainer_state.json");
  ASSERT_TRUE(state_json.ok()) << state_json.status();
  v1::TrainerState state;
  ASSERT_TRUE(ParseJsonMessage(*state_json, &state).ok());
  EXPECT_EQ(state.reward_history_size(), 5);
  EXPECT_EQ(state.correct_rate_history_size(), 5);
  EXPECT_EQ(state.pass_rate_history_size(), 5);
  // The summary gives the reward's spread beside its means.
  EXPECT_THAT(output, ::testing::ContainsRegex("mean reward, first/last 1 +[0-9.]+ \\(sd "));
  // The job's curves, beside its checkpoints and named in the summary: the
  // warm-start loss, the three GRPO steps' reward and stage pass rates, and
  // the held-out rounds.
  const std::string curves_path = dir.Sub("run/state/jobs/job-000001/curves.svg");
  EXPECT_THAT(output, HasSubstr(curves_path));
  auto curves = ReadFileToString(curves_path);
  ASSERT_TRUE(curves.ok()) << curves.status();
  EXPECT_THAT(*curves, HasSubstr("<svg "));
  for (const char* series : {"warm-start loss", "moving average of 10 steps", "compile",
                             "correct", "held-out correct"}) {
    EXPECT_THAT(*curves, ::testing::ContainsRegex(absl::StrCat(
                             "data-series=\"", series, "\" points=\"[0-9.]+,[0-9.]+")))
        << series;
  }
  EXPECT_THAT(*curves, ::testing::ContainsRegex(
                           "data-series=\"moving average of 10 steps\" points=\"([0-9.]+,[0-9.]+ "
                           "){2}[0-9.]+,[0-9.]+\""));  // steps 3, 4 and 5
  // The reward of each step as a dot under the smoothed line.
  size_t dots = 0;
  for (size_t at = 0; (at = curves->find("data-series=\"mean reward per step\"", at)) !=
                      std::string::npos;
       ++at) {
    ++dots;
  }
  EXPECT_EQ(dots, 3u);
  // A PNG beside it where rsvg-convert is installed (setup installs it).
  if (!FindRsvgConvert().empty()) {
    const std::string png = dir.Sub("run/state/jobs/job-000001/curves.png");
    auto bytes = ReadFileToString(png);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(bytes->substr(0, 8), "\x89PNG\r\n\x1a\n");
    EXPECT_THAT(output, HasSubstr(png));
  }
}

// sft.stop_below_loss ends the warm start once the loss is below it: a
// threshold every loss is under ends it after its window (2 steps of at most
// 50), and the job's 2 GRPO steps follow from there. The learner, the
// progress lines, the checkpoint and the job's log all say where it ended.
// With a KL term, its reference is the policy where the warm start ended,
// saved beside the checkpoints.
// With two verifiers each task's warm-up reaches both, its first and second
// choices (RolloutWorkerConfig.warm_up_verifiers): each makes the task's
// first batch's reference epoch while the warm start trains. One RL group
// of two samples stays on its task's first choice (within the affinity
// slack), so an epoch of a task on both verifiers is the warm-up's copy. The
// copy is not delivered: the learner counts one evaluated sample a task.
// Eleven RL steps: the warm-ups (a level-2 task's among them) are all back
// before the job ends, on two cores verifying twelve requests.
TEST(KforgeLocalTest, AWarmUpPreparesEachTasksFirstTwoVerifiersAndCountsOnce) {
  testing::TempDir dir;
  const std::string job = WriteJob(dir, R"({
    "tasks": {"builtin": "kforge-mini", "solutions_dir": "solutions-torch"},
    "warm_start_steps": 1, "total_steps": 12, "prompts_per_step": 1,
    "grpo": {"group_size": 2}, "sampling": {"max_new_tokens": 16},
    "optimizer": {"batch_size": 2, "micro_batch_size": 2, "bf16": false},
    "verifier": {"require_triton": false, "timing": {"enabled": false}},
    "max_staleness": 1
  })");
  auto local = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local",
                                             "--learner_port=0", "--verifiers=2", "--job=" + job,
                                             "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(local.ok()) << local.status();
  const ExitInfo exit = Finish(**local, absl::Seconds(240));
  const std::string output = (*local)->output();
  ASSERT_EQ(exit.code, 0) << output;
  std::smatch warm_up;
  ASSERT_TRUE(std::regex_search(
      output, warm_up,
      std::regex("verifier warm-up: ([0-9]+) of ([0-9]+) training tasks' reference solutions")))
      << output;
  const int tasks = std::stoi(warm_up[2]);
  ASSERT_GT(tasks, 1);
  EXPECT_EQ(warm_up[1], warm_up[2]) << output;
  // Every training task's first-batch epoch, on each verifier.
  std::map<std::string, int> verifiers_of;
  for (const char* name : {"verifier-0.log", "verifier-1.log"}) {
    auto log = ReadFileToString(dir.Sub(absl::StrCat("run/", name)));
    ASSERT_TRUE(log.ok()) << log.status();
    const std::regex made("reference epoch made\" task=(\\S+) batch=job-000001/b0 ");
    std::map<std::string, int> here;
    for (auto it = std::sregex_iterator(log->begin(), log->end(), made);
         it != std::sregex_iterator(); ++it) {
      here[(*it)[1]] = 1;
    }
    for (const auto& [task, one] : here) verifiers_of[task] += one;
  }
  EXPECT_EQ(verifiers_of.size(), static_cast<size_t>(tasks));
  for (const auto& [task, count] : verifiers_of) EXPECT_EQ(count, 2) << task;
  // The warm-ups are the only evaluated samples (no held-out tasks): one
  // each, the copies nowhere in the ledger.
  EXPECT_THAT(output, ::testing::ContainsRegex(absl::StrCat(
                          "samples +[0-9]+ accepted: [0-9]+ trained, [0-9]+ stale, ", tasks,
                          " evaluated, .*0 still out")))
      << output;
}

TEST(KforgeLocalTest, AWarmStartEndsEarlyOnceTheLossIsBelowTheThreshold) {
  testing::TempDir dir;
  const std::string job = R"({
    "tasks": {"builtin": "kforge-mini", "solutions_dir": "solutions-torch"},
    "warm_start_steps": 50, "total_steps": 2, "prompts_per_step": 2,
    "sft": {"stop_below_loss": 1000, "stop_window_steps": 2},
    "grpo": {"group_size": 2, "kl_coef": 0.05}, "sampling": {"max_new_tokens": 16},
    "optimizer": {"batch_size": 4, "micro_batch_size": 2, "bf16": false},
    "verifier": {"require_triton": false, "timing": {"enabled": false}},
    "checkpoint": {"every_steps": 100}, "max_staleness": 1
  })";
  std::string output;
  ASSERT_NO_FATAL_FAILURE(RunJobToTheEnd(dir, job, &output));
  EXPECT_THAT(output, HasSubstr("up to 50 warm-start steps (until the loss is below 1000)"));
  EXPECT_TRUE(std::filesystem::exists(dir.Sub("run/state/jobs/job-000001/reference/config.json")));
  // Progress is polled: not every step gets a line, the last one does.
  EXPECT_THAT(output, ::testing::ContainsRegex("step +4/4 +v[0-9]+ +grpo"));
  EXPECT_THAT(output, ::testing::ContainsRegex("steps +4 of 4"));
  EXPECT_THAT(output, HasSubstr("JOB_SUCCEEDED"));
  auto log = ReadFileToString(dir.Sub("run/learner.log"));
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, ::testing::ContainsRegex("warm start ended early[^\n]* step=2 "));
  EXPECT_THAT(*log, ::testing::ContainsRegex("KL reference taken[^\n]* step=2 "));
  const std::string ckpt = dir.Sub("run/state/jobs/job-000001/checkpoints/step-00000004");
  auto state_json = ReadFileToString(ckpt + "/trainer_state.json");
  ASSERT_TRUE(state_json.ok()) << state_json.status() << "\n" << output;
  v1::TrainerState state;
  ASSERT_TRUE(ParseJsonMessage(*state_json, &state).ok());
  EXPECT_EQ(state.warm_start_ended_at(), 2);
  EXPECT_EQ(state.step(), 4);
  EXPECT_EQ(state.loss_history_size(), 4);
}

// Two GRPO steps of two-turn trajectories on the built-in tasks.
constexpr const char* kTwoTurnJob = R"({
  "tasks": {"builtin": "kforge-mini", "solutions_dir": "solutions-torch"},
  "total_steps": 2, "prompts_per_step": 2,
  "grpo": {"group_size": 2}, "sampling": {"max_new_tokens": 16},
  "optimizer": {"batch_size": 4, "micro_batch_size": 2, "bf16": false},
  "verifier": {"require_triton": false, "timing": {"enabled": false}},
  "checkpoint": {"every_steps": 100}, "max_staleness": 1,
  "multi_turn": {"max_turns": 2}
})";

// Multi-turn refinement (JobSpec.multi_turn): the tiny policy's first
// answers fail the verifier, so every trajectory takes its second turn,
// sampled by the rollout worker under the policy version it holds then, over
// a prompt that ends with the verifier's feedback; the learner completes
// groups of whole trajectories.
TEST(KforgeLocalTest, AMultiTurnJobSamplesASecondTurnWithTheVerifiersFeedback) {
  testing::TempDir dir;
  std::string output;
  ASSERT_NO_FATAL_FAILURE(RunJobToTheEnd(dir, kTwoTurnJob, &output));
  EXPECT_THAT(output, HasSubstr("JOB_SUCCEEDED"));
  auto samples = ReadFileToString(dir.Sub("run/state/jobs/job-000001/samples.jsonl"));
  ASSERT_TRUE(samples.ok()) << samples.status();
  int first_turns = 0, second_turns = 0;
  // Policy version of each trajectory's first turn, by "group/index".
  std::map<std::string, double> first_versions;
  const std::vector<std::string> lines = absl::StrSplit(*samples, '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    google::protobuf::Struct sample;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &sample).ok()) << line;
    const auto& fields = sample.fields();
    ASSERT_TRUE(fields.count("turn")) << line;
    EXPECT_TRUE(fields.count("policy_version")) << line;
    const std::string trajectory = absl::StrCat(fields.at("group").string_value(), "/",
                                                fields.at("index").number_value());
    if (fields.at("turn").number_value() == 0) {
      ++first_turns;
      first_versions[trajectory] = fields.at("policy_version").number_value();
      EXPECT_FALSE(fields.count("prompt")) << line;
      continue;
    }
    ++second_turns;
    EXPECT_EQ(fields.at("turn").number_value(), 1) << line;
    // Sampled after the first turn's verdict, under the same or a newer policy.
    ASSERT_TRUE(first_versions.count(trajectory)) << line;
    EXPECT_GE(fields.at("policy_version").number_value(), first_versions[trajectory]) << line;
    ASSERT_TRUE(fields.count("prompt")) << line;
    EXPECT_THAT(fields.at("prompt").string_value(), HasSubstr("The verifier's feedback on your answer"))
        << line;
  }
  // Two steps of two groups of two trajectories; a trajectory whose first
  // turn passed (or whose verdict was a verifier fault) has no second.
  EXPECT_EQ(first_turns, 8) << *samples;
  EXPECT_GT(second_turns, 0) << *samples;
}

TEST(KforgeLocalTest, ShortAndJobExcludeEachOther) {
  testing::TempDir dir;
  auto local = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local", "--short",
                                             "--job=" + WriteJob(dir, kShortJob),
                                             "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(local.ok());
  const ExitInfo exit = Finish(**local, absl::Seconds(60));
  EXPECT_EQ(exit.code, 2) << (*local)->output();
  EXPECT_THAT((*local)->output(), HasSubstr("--short and --job exclude each other"));
}

TEST(KforgeLocalTest, ANegativeVerifierSlotCountIsRefusedByName) {
  testing::TempDir dir;
  auto local = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local",
                                             "--verifier_slots=-3", "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(local.ok());
  const ExitInfo exit = Finish(**local, absl::Seconds(60));
  EXPECT_EQ(exit.code, 2) << (*local)->output();
  EXPECT_THAT((*local)->output(),
              HasSubstr("--verifier_slots must be 0 (automatic) or 1..256, not -3"));
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("run"))) << "nothing started";
}

TEST(KforgeLocalTest, ARolloutConfigOutOfItsRangeIsRefusedByNameBeforeAnythingStarts) {
  testing::TempDir dir;
  const std::string rollout_config = dir.Sub("rollout.json");
  std::ofstream(rollout_config) << R"({"verifier_affinity_slack": -2})";
  auto local = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local",
                                             "--rollout_config=" + rollout_config,
                                             "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(local.ok());
  const ExitInfo exit = Finish(**local, absl::Seconds(60));
  EXPECT_EQ(exit.code, 2) << (*local)->output();
  EXPECT_THAT((*local)->output(), HasSubstr("--rollout_config " + rollout_config));
  EXPECT_THAT((*local)->output(), HasSubstr("verifier_affinity_slack"));
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("run"))) << "nothing started";
}

TEST(KforgeLocalTest, ANegativeStopGraceIsRefusedByName) {
  testing::TempDir dir;
  auto local = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local",
                                             "--stop_grace_s=-1", "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(local.ok());
  const ExitInfo exit = Finish(**local, absl::Seconds(60));
  EXPECT_EQ(exit.code, 2) << (*local)->output();
  EXPECT_THAT((*local)->output(), HasSubstr("--stop_grace_s must be a number of seconds >= 0, not -1"));
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("run"))) << "nothing started";
}

// Drains kforge local's output until its job record (`job_record`) names the
// checkpoint of `step` (ASSERTs inside: call through ASSERT_NO_FATAL_FAILURE).
void WaitForCheckpoint(ChildProcess& local, const std::string& job_record, int step) {
  const std::string checkpoint = absl::StrFormat("checkpoints/step-%08d", step);
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  for (;;) {
    absl::StatusOr<std::string> record = ReadFileToString(job_record);
    if (record.ok() && absl::StrContains(*record, checkpoint)) return;
    ASSERT_LT(absl::Now(), deadline) << local.output();
    ASSERT_FALSE(local.WaitFor(absl::Milliseconds(100)).ok()) << local.output();
  }
}

TEST(KforgeLocalTest, CtrlCLeavesACheckpointThatTheNextRunResumes) {
  testing::TempDir dir;
  const std::string job = WriteJob(dir, absl::StrReplaceAll(kShortJob, {{"\"total_steps\": 3",
                                                                         "\"total_steps\": 40"}}));
  const std::vector<std::string> argv = {testing::BinaryPath("kforge"), "local", "--learner_port=0",
                                         "--job=" + job, "--run_dir=" + dir.Sub("run")};
  auto first = ChildProcess::Spawn({.argv = argv, .capture_output = true});
  ASSERT_TRUE(first.ok());
  // Stop it once the step-4 checkpoint is on record.
  const std::string job_record = dir.Sub("run/state/jobs/job-000001.json");
  ASSERT_NO_FATAL_FAILURE(WaitForCheckpoint(**first, job_record, 4));
  (*first)->Signal(SIGINT);
  EXPECT_EQ(Finish(**first, absl::Seconds(60)).code, 0) << (*first)->output();
  EXPECT_THAT((*first)->output(), HasSubstr("resumes from its checkpoint"));
  // The job stays RUNNING on disk, with a checkpoint at or after step 4.
  auto latest = ReadFileToString(job_record);
  ASSERT_TRUE(latest.ok());
  EXPECT_THAT(*latest, HasSubstr("JOB_RUNNING"));
  EXPECT_THAT(*latest, HasSubstr("checkpoints/step-0000000"));

  auto second = ChildProcess::Spawn({.argv = argv, .capture_output = true});
  ASSERT_TRUE(second.ok());
  const absl::Time resume_deadline = absl::Now() + absl::Seconds(180);
  // A progress line: "step    7/42" or, resumed past step 9, "step   12/42".
  const std::regex progress_line("step +[0-9]+/42");
  while (!std::regex_search((*second)->output(), progress_line)) {
    ASSERT_LT(absl::Now(), resume_deadline) << (*second)->output();
    ASSERT_FALSE((*second)->WaitFor(absl::Milliseconds(100)).ok()) << (*second)->output();
  }
  (*second)->Signal(SIGINT);
  EXPECT_EQ(Finish(**second, absl::Seconds(60)).code, 0);
  const std::string output = (*second)->output();
  EXPECT_THAT(output, HasSubstr("picking up job-000001"));
  EXPECT_THAT(output, ::testing::Not(HasSubstr("submitted")));
  EXPECT_THAT(output, ::testing::Not(HasSubstr("step    1/42")));  // no restart from scratch
  // The restarted learner took the job up from its checkpoint, not step 0.
  auto log = ReadFileToString(dir.Sub("run/learner.log"));
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, ::testing::ContainsRegex("job running[^\n]* step=([4-9]|[1-9][0-9]) "));
}

// Where the warm start ended is part of the checkpoint: a learner resumed
// after it goes on with the RL steps and the job's end it had (2 warm-start
// steps + 40), not a warm start of up to 50 steps again.
TEST(KforgeLocalTest, AWarmStartThatEndedEarlyStaysEndedAcrossARestart) {
  testing::TempDir dir;
  const std::string job = WriteJob(dir, R"({
    "tasks": {"builtin": "kforge-mini", "solutions_dir": "solutions-torch"},
    "warm_start_steps": 50, "total_steps": 40, "prompts_per_step": 2,
    "sft": {"stop_below_loss": 1000, "stop_window_steps": 2},
    "grpo": {"group_size": 2}, "sampling": {"max_new_tokens": 16},
    "optimizer": {"batch_size": 4, "micro_batch_size": 2, "bf16": false},
    "verifier": {"require_triton": false, "timing": {"enabled": false}},
    "checkpoint": {"every_steps": 2}, "max_staleness": 1
  })");
  const std::vector<std::string> argv = {testing::BinaryPath("kforge"), "local", "--learner_port=0",
                                         "--job=" + job, "--run_dir=" + dir.Sub("run")};
  auto first = ChildProcess::Spawn({.argv = argv, .capture_output = true});
  ASSERT_TRUE(first.ok());
  ASSERT_NO_FATAL_FAILURE(
      WaitForCheckpoint(**first, dir.Sub("run/state/jobs/job-000001.json"), 4));
  (*first)->Signal(SIGINT);
  EXPECT_EQ(Finish(**first, absl::Seconds(60)).code, 0) << (*first)->output();

  auto second = ChildProcess::Spawn({.argv = argv, .capture_output = true});
  ASSERT_TRUE(second.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(180);
  const std::regex progress_line("step +[0-9]+/42 +v[0-9]+ +grpo");
  while (!std::regex_search((*second)->output(), progress_line)) {
    ASSERT_LT(absl::Now(), deadline) << (*second)->output();
    ASSERT_FALSE((*second)->WaitFor(absl::Milliseconds(100)).ok()) << (*second)->output();
  }
  (*second)->Signal(SIGINT);
  EXPECT_EQ(Finish(**second, absl::Seconds(60)).code, 0);
  EXPECT_THAT((*second)->output(), HasSubstr("picking up job-000001"));
  EXPECT_THAT((*second)->output(), ::testing::Not(HasSubstr("warm start  loss")));
  auto log = ReadFileToString(dir.Sub("run/learner.log"));
  ASSERT_TRUE(log.ok());
  // The resumed learner's job line: the end it had, from a step past the
  // warm start; and the warm start ended once only.
  EXPECT_THAT(*log, ::testing::ContainsRegex(
                        "job running[^\n]* step=([4-9]|[1-9][0-9]) total_steps=42"));
  size_t ended = 0;
  for (size_t at = 0; (at = log->find("warm start ended early", at)) != std::string::npos; ++at) {
    ++ended;
  }
  EXPECT_EQ(ended, 1u) << *log;
}

// The ports a service of `kforge local` wrote to its run folder.
v1::ServingPorts ReadPorts(const testing::TempDir& dir, const std::string& name) {
  absl::StatusOr<v1::ServingPorts> ports = testing::LocalServicePorts(dir.Sub("run"), name);
  EXPECT_TRUE(ports.ok()) << ports.status();
  return ports.value_or(v1::ServingPorts());
}

// A served multi-turn job (issue 24): the learner exports the per-turn
// figures of its last step over HTTP, with a `turn` label (mean reward by
// turn, the share of trajectories solved by each turn) and every
// trajectory's turn count; curves.json holds each step's per-turn point.
// Submits `spec` (on the tiny model `kforge local` wrote) to the served
// learner over gRPC and waits for it to succeed; `job` is its last state.
void RunServedJob(const testing::TempDir& dir, const v1::ServingPorts& learner,
                  v1::JobSpec spec, ChildProcess& local, v1::Job* job) {
  spec.set_model_path(std::filesystem::absolute(dir.Sub("run/tiny-model")).string());
  auto jobs = v1::JobService::NewStub(
      MakeChannel("127.0.0.1:" + std::to_string(learner.grpc_port())));
  {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(30));
    const grpc::Status submitted = jobs->SubmitJob(&context, spec, job);
    ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  }
  ASSERT_TRUE(testing::Eventually(
      [&] {
        grpc::ClientContext context;
        SetDeadline(context, absl::Seconds(5));
        v1::GetJobRequest request;
        request.set_job_id(job->id());
        return jobs->GetJob(&context, request, job).ok() && job->state() == v1::JOB_SUCCEEDED;
      },
      absl::Seconds(240)))
      << job->DebugString() << local.output();
}

TEST(KforgeLocalTest, AServedMultiTurnJobExportsItsPerTurnFigures) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> local;
  ASSERT_NO_FATAL_FAILURE(StartServing(dir, 1, &local));
  const v1::ServingPorts learner = ReadPorts(dir, "learner");
  v1::JobSpec spec;
  ASSERT_TRUE(ParseJsonMessage(kTwoTurnJob, &spec).ok());
  v1::Job job;
  ASSERT_NO_FATAL_FAILURE(RunServedJob(dir, learner, spec, **local, &job));
  const v1::JobProgress& progress = job.progress();
  ASSERT_EQ(progress.solved_by_turn_size(), 2) << progress.DebugString();
  ASSERT_EQ(progress.reward_by_turn_size(), 2);
  EXPECT_GE(progress.turns_per_trajectory(), 1.0);
  EXPECT_LE(progress.turns_per_trajectory(), 2.0);

  const int lm = learner.metrics_port();
  for (int turn : {0, 1}) {
    const std::string label = absl::StrCat(R"({turn=")", turn, R"("})");
    EXPECT_NEAR(testing::ScrapeMetric(lm, "kforge_learner_solved_by_turn" + label),
                progress.solved_by_turn(turn), 1e-9)
        << turn;
    EXPECT_NEAR(testing::ScrapeMetric(lm, "kforge_learner_turn_reward_mean" + label),
                progress.reward_by_turn(turn), 1e-9)
        << turn;
  }
  // Two steps of two groups of two trajectories, each counted once.
  EXPECT_EQ(testing::ScrapeMetric(lm, "kforge_learner_turns_per_trajectory_count"), 8);

  auto figures = ReadFileToString(dir.Sub("run/state/jobs/" + job.id() + "/curves.json"));
  ASSERT_TRUE(figures.ok()) << figures.status();
  v1::TrainerState state;
  ASSERT_TRUE(ParseJsonMessage(*figures, &state).ok());
  ASSERT_EQ(state.turn_history_size(), 2);
  EXPECT_EQ(state.turn_history(1).solved_by_turn_size(), 2);
}

// A warm-start step and three GRPO steps on the served mesh: every service
// then exports where its time went over HTTP (the learner per stage, the
// rollout worker's sampler and the verifier's slots), and the job's
// curves.json holds the same per-step times for bench/stage_times.py. (The
// random tiny model's candidates all fail alike, so its GRPO steps have no
// reward variance and train nothing: the warm start is the step that
// trains.)
TEST(KforgeLocalTest, AServedJobExposesEveryStagesTimeAsMetrics) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> local;
  ASSERT_NO_FATAL_FAILURE(StartServing(dir, 1, &local));
  const v1::ServingPorts learner = ReadPorts(dir, "learner");
  const v1::ServingPorts rollout = ReadPorts(dir, "rollout-0");
  const v1::ServingPorts verifier = ReadPorts(dir, "verifier-0");

  v1::JobSpec spec;
  ASSERT_TRUE(ParseJsonMessage(R"({
    "tasks": {"builtin": "kforge-mini", "solutions_dir": "solutions-torch"},
    "warm_start_steps": 1, "total_steps": 3, "prompts_per_step": 2,
    "grpo": {"group_size": 2}, "sampling": {"max_new_tokens": 16},
    "optimizer": {"batch_size": 4, "micro_batch_size": 2, "bf16": false},
    "verifier": {"require_triton": false, "timing": {"enabled": false}},
    "checkpoint": {"every_steps": 4}, "max_staleness": 1})",
                               &spec)
                  .ok());
  v1::Job job;
  ASSERT_NO_FATAL_FAILURE(RunServedJob(dir, learner, spec, **local, &job));
  // The last step's times came with its progress.
  EXPECT_GT(job.progress().times().step_seconds(), 0);
  EXPECT_GT(job.progress().times().rollout_seconds(), 0) << job.progress().DebugString();
  EXPECT_EQ(job.progress().times().samples(), 4);

  const int lm = learner.metrics_port();
  for (const char* stage :
       {"step", "rollout", "verify", "train", "weight_sync", "wait", "verify_queue"}) {
    EXPECT_EQ(testing::ScrapeMetric(
                  lm, absl::StrCat(R"(kforge_learner_step_stage_seconds_count{stage=")", stage, R"("})")),
              4)
        << stage;
  }
  for (const char* stage : {"step", "rollout", "verify", "train"}) {
    EXPECT_GT(testing::ScrapeMetric(
                  lm, absl::StrCat(R"(kforge_learner_step_stage_seconds_sum{stage=")", stage, R"("})")),
              0)
        << stage;
  }
  EXPECT_GT(testing::ScrapeMetric(lm, "kforge_learner_rollout_tokens_per_second"), 0);
  EXPECT_GT(testing::ScrapeMetric(lm, "kforge_learner_verify_candidates_per_second"), 0);
  EXPECT_GE(testing::ScrapeMetric(lm, "kforge_learner_wait_share"), 0);
  // The worker's sampler generated, and has idled since the job ended
  // (counters move on its one-second ticker).
  EXPECT_TRUE(testing::Eventually(
      [&] {
        return testing::ScrapeMetric(rollout.metrics_port(),
                                     R"(kforge_rollout_sampler_seconds_total{state="generating"})") >
                   0 &&
               testing::ScrapeMetric(rollout.metrics_port(),
                                     R"(kforge_rollout_sampler_seconds_total{state="idle"})") > 0;
      },
      absl::Seconds(10)));
  EXPECT_GE(testing::ScrapeMetric(rollout.metrics_port(),
                                  R"(kforge_rollout_sampler_seconds_total{state="between_steps"})"),
            0);
  EXPECT_TRUE(testing::Eventually(
      [&] {
        return testing::ScrapeMetric(verifier.metrics_port(),
                                     R"(kforge_verifier_slot_seconds_total{state="busy"})") > 0 &&
               testing::ScrapeMetric(verifier.metrics_port(),
                                     R"(kforge_verifier_slot_seconds_total{state="idle"})") > 0;
      },
      absl::Seconds(10)));
  EXPECT_GE(testing::ScrapeMetric(verifier.metrics_port(), "kforge_verifier_slots"), 1);
  // Every verdict of the job is in the GPU-wait histogram (on the CPU the
  // "GPU" is the device the candidates share).
  EXPECT_GT(testing::ScrapeMetric(verifier.metrics_port(), "kforge_verifier_gpu_wait_seconds_count"),
            0);

  // curves.json: every step's times, spans from the samples' own stamps.
  auto figures = ReadFileToString(dir.Sub("run/state/jobs/" + job.id() + "/curves.json"));
  ASSERT_TRUE(figures.ok()) << figures.status();
  v1::TrainerState state;
  ASSERT_TRUE(ParseJsonMessage(*figures, &state).ok());
  ASSERT_EQ(state.step_times_history_size(), 4);
  // The warm start: trained, sampled nothing.
  EXPECT_GT(state.step_times_history(0).train_seconds(), 0);
  EXPECT_GT(state.step_times_history(0).trained_tokens(), 0);
  EXPECT_EQ(state.step_times_history(0).samples(), 0);
  for (const v1::StepTimes& times :
       std::vector<v1::StepTimes>(state.step_times_history().begin() + 1,
                                  state.step_times_history().end())) {
    EXPECT_EQ(times.samples(), 4);
    EXPECT_EQ(times.samples_timed(), 4);
    EXPECT_EQ(times.candidates_verified(), 4);
    EXPECT_GT(times.rollout_seconds(), 0);
    EXPECT_GT(times.verify_seconds(), 0);
    EXPECT_GT(times.generated_tokens(), 0);
  }
  EXPECT_TRUE(state.curriculum().level1_window().empty()) << "resume-only state left out";

  // samples.jsonl: every sample of the three GRPO steps (4 each, under the
  // default of 16), each a JSON object with its step and why it ended.
  auto samples = ReadFileToString(dir.Sub("run/state/jobs/" + job.id() + "/samples.jsonl"));
  ASSERT_TRUE(samples.ok()) << samples.status();
  std::vector<std::string> lines = absl::StrSplit(*samples, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 12u) << *samples;
  for (const std::string& line : lines) {
    google::protobuf::Struct sample;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &sample).ok()) << line;
    EXPECT_GE(sample.fields().at("step").number_value(), 2) << line;
    EXPECT_FALSE(sample.fields().at("task").string_value().empty()) << line;
    EXPECT_FALSE(sample.fields().at("stage_reached").string_value().empty()) << line;
    EXPECT_TRUE(sample.fields().count("completion")) << line;
  }
  // bench/sample_stats.py reads it: the twelve samples, where they ended,
  // and no completion with two verdicts.
  auto stats = ChildProcess::Spawn(
      {.argv = {"python3", std::string(KFORGE_TEST_SOURCE_DIR) + "/bench/sample_stats.py",
                dir.Sub("run/state/jobs/" + job.id() + "/samples.jsonl")},
       .capture_output = true});
  ASSERT_TRUE(stats.ok()) << stats.status();
  const ExitInfo stats_exit = Finish(**stats, absl::Seconds(60));
  EXPECT_EQ(stats_exit.code, 0) << (*stats)->output();
  EXPECT_THAT((*stats)->output(), HasSubstr("samples: 12 over 3 step(s)"));
  EXPECT_THAT((*stats)->output(),
              HasSubstr("completions verified more than once with different verdicts: 0"));

  (*local)->Signal(SIGINT);
  EXPECT_EQ(Finish(**local, absl::Seconds(60)).code, 0) << (*local)->output();
}

// Drains kforge local's output until it holds `text`.
bool WaitForOutput(ChildProcess& local, const std::string& text, absl::Duration timeout) {
  return testing::WaitForOutput(
      local, [&](const std::string& output) { return absl::StrContains(output, text); }, timeout);
}

// A service that dies is started again on its address, as Kubernetes
// restarts a pod; one that keeps dying ends the run, naming it and showing
// the end of its log, and the others are stopped.
TEST(KforgeLocalTest, ADeadServiceIsRestartedOnItsAddressUntilItDiesTooOften) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> local;
  ASSERT_NO_FATAL_FAILURE(
      StartServing(dir, 1, &local, {"--max_restarts=1", "--restart_backoff_s=0.2"}));
  const v1::ServingPorts before = ReadPorts(dir, "verifier-0");
  const v1::ServingPorts learner = ReadPorts(dir, "learner");
  ASSERT_EQ(::kill(before.pid(), SIGKILL), 0);
  ASSERT_TRUE(WaitForOutput(**local, absl::StrCat("verifier-0 restarted on 127.0.0.1:",
                                                  before.grpc_port()),
                            absl::Seconds(120)))
      << (*local)->output();
  EXPECT_THAT((*local)->output(), HasSubstr("verifier-0 exited (killed by signal 9"));
  const v1::ServingPorts after = ReadPorts(dir, "verifier-0");
  EXPECT_EQ(after.grpc_port(), before.grpc_port());
  EXPECT_NE(after.pid(), before.pid());
  EXPECT_TRUE(WaitForServing(MakeChannel("127.0.0.1:" + std::to_string(after.grpc_port())),
                             absl::Seconds(5))
                  .ok());

  ASSERT_EQ(::kill(after.pid(), SIGKILL), 0);
  const ExitInfo exit = Finish(**local, absl::Seconds(60));
  EXPECT_EQ(exit.code, 1) << (*local)->output();
  EXPECT_THAT((*local)->output(), HasSubstr("verifier-0 died 2 times within"));
  EXPECT_THAT((*local)->output(), HasSubstr("giving up"));
  EXPECT_THAT((*local)->output(), HasSubstr(dir.Sub("run/verifier-0.log")));
  EXPECT_FALSE(IsRunning(learner.pid())) << "the learner outlived the run";
}

// The job kforge local runs goes on through a killed learner (restarted,
// resuming from its checkpoint) and a killed verifier, and ends as usual:
// the summary, exit 0.
TEST(KforgeLocalTest, ItsJobGoesOnThroughAKilledLearnerAndVerifier) {
  testing::TempDir dir;
  const std::string job = WriteJob(dir, absl::StrReplaceAll(kShortJob, {{"\"total_steps\": 3",
                                                                         "\"total_steps\": 16"}}));
  auto local = ChildProcess::Spawn({.argv = {testing::BinaryPath("kforge"), "local",
                                             "--learner_port=0", "--job=" + job,
                                             "--restart_backoff_s=0.2",
                                             "--run_dir=" + dir.Sub("run")},
                                    .capture_output = true});
  ASSERT_TRUE(local.ok());
  // The learner dies once the step-4 checkpoint is on record.
  ASSERT_NO_FATAL_FAILURE(
      WaitForCheckpoint(**local, dir.Sub("run/state/jobs/job-000001.json"), 4));
  ASSERT_EQ(::kill(ReadPorts(dir, "learner").pid(), SIGKILL), 0);
  ASSERT_TRUE(WaitForOutput(**local, "learner restarted on", absl::Seconds(120)))
      << (*local)->output();
  ASSERT_EQ(::kill(ReadPorts(dir, "verifier-0").pid(), SIGKILL), 0);
  ASSERT_TRUE(WaitForOutput(**local, "verifier-0 restarted on", absl::Seconds(120)))
      << (*local)->output();
  const ExitInfo exit = Finish(**local, absl::Seconds(300));
  EXPECT_EQ(exit.code, 0) << (*local)->output();
  EXPECT_THAT((*local)->output(), HasSubstr("JOB_SUCCEEDED")) << (*local)->output();
  auto log = ReadFileToString(dir.Sub("run/learner.log"));
  ASSERT_TRUE(log.ok());
  // The restarted learner took the job up from its checkpoint, not step 0.
  EXPECT_THAT(*log, ::testing::ContainsRegex("job running[^\n]* step=([4-9]|[1-9][0-9]) "))
      << "the restarted learner did not resume the job from its checkpoint";
}

// kforge local killed with -9 cannot stop its services itself: the kernel
// does (they die with it), so no orphan keeps its ports or its GPU.
TEST(KforgeLocalTest, KilledWithSigkillItTakesItsServicesWithIt) {
  testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<ChildProcess>> local;
  ASSERT_NO_FATAL_FAILURE(StartServing(dir, 1, &local));
  std::vector<int> pids;
  for (const char* name : {"learner", "verifier-0", "rollout-0"}) {
    pids.push_back(ReadPorts(dir, name).pid());
  }
  ASSERT_EQ(::kill((*local)->pid(), SIGKILL), 0);
  (void)(*local)->WaitFor(absl::Seconds(10));
  EXPECT_TRUE(testing::Eventually(
      [&] { return std::none_of(pids.begin(), pids.end(), IsRunning); }, absl::Seconds(20)));
}

}  // namespace
}  // namespace kforge
