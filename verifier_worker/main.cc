// kforge-verifier: runs untrusted candidates in a sandbox and reports
// verdicts (VerifierService). Healthy (SERVING) once its Python interpreter
// has been found and checked.
#include <unistd.h>

#include <filesystem>
#include <vector>

#include <functional>
#include <memory>
#include <string>
#include <tuple>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/security/call_auth.h"
#include "common/security/channel_security.h"
#include "common/server/crash_report.h"
#include "common/server/host_name.h"
#include "common/server/periodic_thread.h"
#include "common/server/process_main.h"
#include "common/server/service_host.h"
#include "common/server/termination_signals.h"
#include "kforge/v1/verifier_service.grpc.pb.h"
#include "common/server/executable_path.h"
#include "verifier_worker/funnel/funnel.h"
#include "verifier_worker/python/python_interpreter.h"
#include "verifier_worker/verifier_metrics.h"
#include "verifier_worker/verifier_service.h"

ABSL_FLAG(std::string, config, "",
          "VerifierWorkerConfig as JSON (proto/kforge/v1/service_config.proto)");
ABSL_FLAG(int, port, -1, "gRPC port (overrides the config; 0 picks a free one)");
ABSL_FLAG(int, metrics_port, -1, "HTTP /metrics port (overrides the config; 0 picks a free one)");
ABSL_FLAG(std::string, host, "", "listen address (overrides the config)");
ABSL_FLAG(std::string, port_file, "", "write the chosen ports here as JSON once listening");
ABSL_FLAG(std::string, python, "", "Python interpreter with torch (overrides the config)");
ABSL_FLAG(std::string, device, "", "cpu or cuda:N (overrides the config)");
ABSL_FLAG(int, max_concurrent, -1,
          "candidates verified at once, 1..1024 (overrides the config's max_concurrent)");
ABSL_FLAG(int, spare_sandboxes, -1,
          "sandboxes kept ready, 0..256 (overrides the config's spare_sandboxes)");
ABSL_FLAG(int, reference_cache_gib, -1,
          "GiB of host memory for shared reference epochs, 0..4096 (overrides the config's "
          "reference_cache_bytes)");
ABSL_FLAG(std::string, learner, "",
          "learner address host:port for delivering scored samples (overrides the config)");

namespace kforge {
namespace {

// The folders of the verifier's own secrets (its TLS key, token files):
// whole folders, since a Kubernetes Secret mounts the key as a link into a
// folder of its own, beside the other files of the Secret.
std::vector<std::string> SecretDirs(const v1::ServerConfig& server) {
  std::vector<std::string> files(server.auth().job_token_files().begin(),
                                 server.auth().job_token_files().end());
  files.insert(files.end(), server.auth().service_token_files().begin(),
               server.auth().service_token_files().end());
  if (!server.tls().key_file().empty()) files.push_back(server.tls().key_file());
  std::vector<std::string> dirs;
  for (const std::string& file : files) {
    std::error_code ec;
    const std::filesystem::path path = std::filesystem::absolute(file, ec);
    if (ec) continue;
    dirs.push_back(path.parent_path().string());
    const std::filesystem::path real = std::filesystem::canonical(path, ec);
    if (!ec) dirs.push_back(real.parent_path().string());
  }
  return dirs;
}

int Run() {
  Logger log("verifier_worker");
  v1::VerifierWorkerConfig config;
  const ServerFlagOverrides overrides{absl::GetFlag(FLAGS_port), absl::GetFlag(FLAGS_metrics_port),
                                      absl::GetFlag(FLAGS_host)};
  if (absl::Status s = LoadProcessConfig(absl::GetFlag(FLAGS_config), overrides, &config,
                                         "verifier_worker_config");
      !s.ok()) {
    log.Error("invalid configuration", {{"error", s.message()}});
    return kExitConfigError;
  }
  if (!absl::GetFlag(FLAGS_python).empty()) config.set_python(absl::GetFlag(FLAGS_python));
  if (!absl::GetFlag(FLAGS_device).empty()) config.set_device(absl::GetFlag(FLAGS_device));
  // The flags bypass the config's range checks, so they are checked here,
  // against the same bounds (service_config.proto).
  using Setter = std::function<void(int)>;
  for (const auto& [name, value, low, high, set] :
       {std::tuple{"--max_concurrent", absl::GetFlag(FLAGS_max_concurrent), 1, 1024,
                   Setter([&](int v) { config.set_max_concurrent(v); })},
        std::tuple{"--spare_sandboxes", absl::GetFlag(FLAGS_spare_sandboxes), 0, 256,
                   Setter([&](int v) { config.set_spare_sandboxes(v); })},
        std::tuple{"--reference_cache_gib", absl::GetFlag(FLAGS_reference_cache_gib), 0, 4096,
                   Setter([&](int v) { config.set_reference_cache_bytes(int64_t{v} << 30); })}}) {
    if (value == -1) continue;  // not given
    if (value < low || value > high) {
      log.Error("invalid configuration",
                {{"error", absl::StrCat(name, ": ", value, " is not in ", low, "..", high)}});
      return kExitConfigError;
    }
    set(value);
  }
  if (config.harness_dir().empty()) config.set_harness_dir(SharedDataPath("harness"));

  if (!absl::GetFlag(FLAGS_learner).empty()) config.set_learner_address(absl::GetFlag(FLAGS_learner));
  auto registry = std::make_shared<prometheus::Registry>();
  absl::StatusOr<std::unique_ptr<CallAuthorizer>> authorizer = CallAuthorizer::Create(
      {.config = config.server(), .serves_peers = true, .registry = registry.get()});
  absl::StatusOr<ChannelSecurity> to_learner = ChannelSecurity::ForPeers(config.server());
  if (to_learner.ok()) {
    to_learner->set_reconnect_backoff_max(absl::Seconds(config.rpc().backoff_max_s()));
  }
  absl::Status security = !authorizer.ok() ? authorizer.status()
                          : !to_learner.ok() ? to_learner.status()
                          : config.learner_address().empty()
                              ? absl::OkStatus()
                              : to_learner->CheckTarget(config.learner_address(), "learner_address");
  if (!security.ok()) {
    log.Error("invalid configuration", {{"error", security.message()}});
    return kExitConfigError;
  }
  log.Info("access", {{"verifier_service", (*authorizer)->peers_need()},
                      {"to_learner", to_learner->Describe()}});
  VerifierMetrics metrics(*registry);
  // The interpreter is checked and the harness started before the server
  // listens, so a verifier that answers is one that can verify.
  std::unique_ptr<Funnel> funnel;
  std::unique_ptr<LearnerDelivery> delivery;  // outlives the service that uses it
  std::unique_ptr<VerifierServiceImpl> verifier_service;
  absl::StatusOr<PythonInfo> python =
      FindPythonWithTorch(config.python(), absl::Seconds(config.python_check_timeout_s()));
  if (!python.ok()) {
    log.Error("python check failed", {{"error", python.status().message()}});
    return kExitConfigError;
  }
  log.Info("python ready", {{"python", python->path}, {"version", python->python_version},
                            {"torch", python->torch_version},
                            {"triton", python->triton_version.empty() ? "absent" : python->triton_version},
                            {"cuda", python->cuda_available}});
  absl::StatusOr<CgroupMode> cgroups = ParseCgroupMode(config.cgroups());
  if (!cgroups.ok()) {
    log.Error("invalid configuration", {{"error", cgroups.status().message()}});
    return kExitConfigError;
  }
  absl::StatusOr<std::unique_ptr<Funnel>> created = Funnel::Create(
      {.harness = {.python = python->path,
                   .harness_dir = config.harness_dir(),
                   .log_dir = config.work_dir() + "/logs",
                   .device = config.device(),
                   .pass_env = {config.harness_env().begin(), config.harness_env().end()}},
       .work_dir = config.work_dir() + "/candidates",
       .max_concurrent = config.max_concurrent(),
       .cache_entries = static_cast<size_t>(config.cache_entries()),
       .start_timeout = absl::Seconds(config.python_check_timeout_s()),
       .candidate_threads = config.candidate_threads(),
       .cgroups = *cgroups,
       .spare_sandboxes = config.spare_sandboxes(),
       .reference_cache_bytes = config.reference_cache_bytes(),
       .reference_servers = config.reference_servers(),
       // A verifier on the CPU makes nothing ahead: its epochs (test-sized
       // tasks) take a fraction of a second, and a make ahead would take a
       // core from the candidates (on 2 loaded cores it slowed the fault
       // tests' flow past their windows).
       .reference_prefetch_queue =
           absl::StartsWith(config.device(), "cuda") ? config.reference_prefetch_queue() : 0,
       .timing_stops_requests = config.timing_stops_requests(),
       .triton_launchers = config.triton_launchers(),
       .secret_dirs = SecretDirs(config.server())},
      &metrics);
  if (!created.ok()) {
    log.Error("cannot start the verifier funnel", {{"error", created.status().message()}});
    return kExitRuntimeError;
  }
  funnel = *std::move(created);
  log.Info("funnel ready", {{"device", funnel->device_name()}, {"harness", config.harness_dir()},
                            {"cgroups", funnel->cgroup_report()},
                            {"triton_base_cache", funnel->triton_cache_report()},
                            {"max_concurrent", config.max_concurrent()},
                            {"spare_sandboxes", config.spare_sandboxes()},
                            {"reference_cache_bytes", config.reference_cache_bytes()}});
  if (!config.learner_address().empty()) {
    delivery = std::make_unique<LearnerDelivery>(config.learner_address(), config.rpc(),
                                                 absl::StrCat(HostName(), "/", ::getpid()),
                                                 *to_learner);
  }
  verifier_service = std::make_unique<VerifierServiceImpl>(
      funnel.get(), &metrics, &config, delivery.get(),
      (*authorizer)->PeerGuard(v1::VerifierService::service_full_name()));
  absl::StatusOr<std::unique_ptr<ServiceHost>> host = ServiceHost::Create(
      {.config = config.server(),
       .component = "verifier_worker",
       .services = {verifier_service.get()},
       .service_names = {v1::VerifierService::service_full_name()},
       .registry = registry,
       .port_file = absl::GetFlag(FLAGS_port_file)});
  if (!host.ok()) {
    log.Error("cannot start server", {{"error", host.status().message()}});
    return kExitRuntimeError;
  }
  (*host)->SetServing(true);
  // Before the service goes (declared after it, destroyed first).
  auto record_slots = [&] {
    metrics.RecordSlotTime(verifier_service->busy_time(), config.max_concurrent());
  };
  record_slots();
  PeriodicThread slot_ticker("kf-verifier-mtr", absl::Seconds(1), record_slots);
  const int sig = WaitForTerminationSignal();
  log.Info("shutting down", {{"signal", sig}});
  (*host)->Shutdown();
  return kExitOk;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  kforge::InstallCrashReport(argv[0]);
  kforge::BlockTerminationSignals();
  absl::SetProgramUsageMessage("kforge verifier worker");
  absl::ParseCommandLine(argc, argv);
  return kforge::Run();
}
