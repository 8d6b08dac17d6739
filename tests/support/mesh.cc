#include "tests/support/mesh.h"

#include <dirent.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"
#include "tests/support/fixtures.h"
#include "tests/support/service_process.h"

namespace kforge::testing {
namespace {

std::string ReadProcFile(int pid, const char* name) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/", name));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The parent pid and state letter from /proc/PID/stat; {-1, '?'} when gone.
std::pair<int, char> ParentAndState(int pid) {
  const std::string stat = ReadProcFile(pid, "stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return {-1, '?'};
  std::istringstream rest(stat.substr(paren + 2));
  char state = '?';
  int ppid = -1;
  rest >> state >> ppid;
  return {ppid, state};
}

}  // namespace

std::optional<double> MetricValue(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
    double value = 0;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(line), &value)) return value;
  }
  return std::nullopt;
}

bool Eventually(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return true;
}

int GpuCount() {
  std::error_code ec;
  int count = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++count;
  }
  return count;
}

double ScrapeMetric(int port, const std::string& series) {
  absl::StatusOr<std::string> body = HttpGet(port, "/metrics");
  if (!body.ok()) return -1;
  return MetricValue(*body, series).value_or(-1);
}

SampleLedger ScrapeLedger(int learner_metrics_port) {
  SampleLedger ledger;
  absl::StatusOr<std::string> body = HttpGet(learner_metrics_port, "/metrics");
  if (!body.ok()) return ledger;
  auto entry = [&](const char* name) {
    return MetricValue(*body, absl::StrCat(R"(kforge_learner_sample_ledger{entry=")", name, R"("})"))
        .value_or(-1);
  };
  ledger.accepted = entry("accepted");
  ledger.completed = entry("completed");
  ledger.discarded = entry("discarded");
  ledger.held = entry("held");
  ledger.acks_accepted =
      MetricValue(*body, R"(kforge_learner_samples_total{status="accepted"})").value_or(-1);
  return ledger;
}

SampleLedger SettledLedger(int learner_metrics_port, absl::Duration timeout) {
  SampleLedger ledger;
  Eventually(
      [&] {
        ledger = ScrapeLedger(learner_metrics_port);
        return ledger.accepted >= 0 && ledger.accepted == ledger.acks_accepted;
      },
      timeout);
  return ledger;
}

bool SampleLedger::Balanced() const {
  return accepted >= 0 && accepted == completed + discarded + held;
}

std::string SampleLedger::Describe() const {
  return absl::StrCat("accepted ", accepted, " = completed ", completed, " + discarded ",
                      discarded, " + held ", held, " (acks accepted ", acks_accepted, ")");
}

absl::StatusOr<v1::ServingPorts> LocalServicePorts(const std::string& run_dir,
                                                   const std::string& name) {
  absl::StatusOr<std::string> json = ReadFileToString(run_dir + "/" + name + ".ports");
  if (!json.ok()) return json.status();
  v1::ServingPorts ports;
  if (absl::Status parsed = ParseJsonMessage(*json, &ports); !parsed.ok()) return parsed;
  return ports;
}

bool WaitForOutput(ChildProcess& process, const std::function<bool(const std::string&)>& done,
                   absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done(process.output())) {
    if (absl::Now() > deadline || process.WaitFor(absl::Milliseconds(100)).ok()) {
      return done(process.output());
    }
  }
  return true;
}

absl::Status WriteTinyModelDir(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> tiny = ChildProcess::Spawn(
      {.argv = {BinaryPath("kforge"), "tiny-model", dir}, .capture_output = true});
  if (!tiny.ok()) return tiny.status();
  absl::StatusOr<ExitInfo> exit = (*tiny)->WaitFor(absl::Seconds(180));
  if (!exit.ok()) return exit.status();
  if (!exit->exited || exit->code != 0) {
    return absl::InternalError(
        absl::StrCat("kforge tiny-model ", exit->Describe(), ": ", (*tiny)->output()));
  }
  return absl::OkStatus();
}

v1::JobSpec FastJobSpec(const std::string& model_dir) {
  v1::JobSpec spec;
  spec.set_name("fault test");
  spec.set_model_path(model_dir);
  spec.mutable_tasks()->set_builtin("kforge-mini");
  spec.mutable_tasks()->set_solutions_dir("solutions-torch");
  spec.set_algorithm(v1::ALGORITHM_GRPO);
  spec.set_warm_start_steps(0);
  spec.set_total_steps(6);
  spec.set_prompts_per_step(2);
  spec.mutable_grpo()->set_group_size(2);
  spec.mutable_sampling()->set_max_new_tokens(16);
  spec.mutable_optimizer()->set_batch_size(4);
  spec.mutable_optimizer()->set_micro_batch_size(4);
  spec.mutable_optimizer()->set_bf16(false);
  spec.mutable_verifier()->set_require_triton(false);
  spec.mutable_verifier()->mutable_timing()->set_enabled(false);
  spec.mutable_checkpoint()->set_every_steps(2);
  spec.set_group_timeout_s(30);
  return spec;
}

std::vector<int> DescendantPids(int pid) {
  std::vector<std::pair<int, int>> all;  // (pid, ppid)
  if (DIR* proc = ::opendir("/proc")) {
    while (dirent* entry = ::readdir(proc)) {
      int child = 0;
      if (!absl::SimpleAtoi(entry->d_name, &child)) continue;
      const auto [ppid, state] = ParentAndState(child);
      if (ppid > 0 && state != 'Z') all.emplace_back(child, ppid);
    }
    ::closedir(proc);
  }
  std::vector<int> found = {pid};
  for (size_t i = 0; i < found.size(); ++i) {
    for (const auto& [child, ppid] : all) {
      if (ppid == found[i]) found.push_back(child);
    }
  }
  found.erase(found.begin());
  return found;
}

bool ProcessAlive(int pid) {
  const char state = ParentAndState(pid).second;
  return state != '?' && state != 'Z';
}

long ResidentKiB(int pid) {
  const std::string status = ReadProcFile(pid, "status");
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "VmRSS:")) continue;
    line = absl::StripAsciiWhitespace(line);
    long kib = 0;
    if (absl::SimpleAtoi(line.substr(0, line.find(' ')), &kib)) return kib;
  }
  return 0;
}

}  // namespace kforge::testing
