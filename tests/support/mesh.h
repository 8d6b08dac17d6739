// Helpers for tests that run a kforge mesh process by process on loopback and
// then kill, stop or restart one member: reading a service's /metrics,
// a job that finishes in seconds on a tiny random model, and the processes a
// service left behind.
//
//   double accepted = ScrapeMetric(learner.ports.metrics_port(),
//                                  R"(kforge_learner_samples_total{status="accepted"})");
//   v1::JobSpec spec = FastJobSpec(model_dir);
#ifndef KFORGE_TESTS_SUPPORT_MESH_H_
#define KFORGE_TESTS_SUPPORT_MESH_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/process/child_process.h"
#include "kforge/v1/job.pb.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge::testing {

// The value of one series in Prometheus text exposition, named exactly as
// exported ("kforge_ready" or `kforge_learner_samples_total{status="accepted"}`);
// nullopt when absent.
std::optional<double> MetricValue(const std::string& text, const std::string& series);

// Scrapes http://127.0.0.1:port/metrics for one series; -1 when the scrape
// fails or the series is absent.
double ScrapeMetric(int port, const std::string& series);

// The learner's ledger of accepted samples (kforge_learner_sample_ledger)
// and its count of accepted acks, from one scrape; -1 each when it fails.
// The ledger is published once per heartbeat interval, the ack count at
// once: they agree once the flow has been quiet that long.
struct SampleLedger {
  double accepted = -1, completed = -1, discarded = -1, held = -1;
  double acks_accepted = -1;
  // accepted == completed + discarded + held, and a scrape that worked.
  bool Balanced() const;
  std::string Describe() const;
};
SampleLedger ScrapeLedger(int learner_metrics_port);
// The ledger once its count has caught up with the acks' (the last scrape
// after `timeout` otherwise).
SampleLedger SettledLedger(int learner_metrics_port, absl::Duration timeout = absl::Seconds(10));

// Polls `condition` every 100 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& condition, absl::Duration timeout);

// GPUs the NVIDIA driver shows (/proc/driver/nvidia/gpus); 0 without one.
int GpuCount();

// Runs `kforge tiny-model dir` (a random Qwen2-style checkpoint).
absl::Status WriteTinyModelDir(const std::string& dir);

// GRPO on the built-in kforge-mini tasks, no warm start, 6 steps of 2
// prompts x 2 samples of at most 16 tokens, no Triton, no timing, a
// checkpoint every 2 steps, groups re-issued after 30 s. A random model writes no code, so every verdict
// fails stage 1 at once and steps pass without updates: what fault tests need
// is the flow, not the learning.
v1::JobSpec FastJobSpec(const std::string& model_dir);

// The ports a service of `kforge local` last wrote to its run folder
// (`run_dir`/NAME.ports); NOT_FOUND while it is restarting.
absl::StatusOr<v1::ServingPorts> LocalServicePorts(const std::string& run_dir,
                                                   const std::string& name);

// Drains `process`'s captured output until `done` holds for it, the process
// exits or `timeout` passes; whether `done` holds.
bool WaitForOutput(ChildProcess& process, const std::function<bool(const std::string&)>& done,
                   absl::Duration timeout);

// Every live descendant of `pid` (children, their children, ...).
std::vector<int> DescendantPids(int pid);
// True while `pid` exists and is not a zombie.
bool ProcessAlive(int pid);
// Resident memory of `pid` in KiB (VmRSS); 0 when it is gone.
long ResidentKiB(int pid);

}  // namespace kforge::testing

#endif  // KFORGE_TESTS_SUPPORT_MESH_H_
