// kforge-rollout: samples candidate groups for the learner's tasks and
// streams them to verifiers. Healthy (SERVING) while registered with the
// learner.
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/server/process_main.h"
#include "common/server/service_host.h"
#include "common/server/termination_signals.h"
#include "model/torch_runtime.h"
#include "rollout_worker/learner_link.h"

ABSL_FLAG(std::string, config, "",
          "RolloutWorkerConfig as JSON (proto/kforge/v1/service_config.proto)");
ABSL_FLAG(int, port, -1, "gRPC port (overrides the config; 0 picks a free one)");
ABSL_FLAG(int, metrics_port, -1, "HTTP /metrics port (overrides the config; 0 picks a free one)");
ABSL_FLAG(std::string, host, "", "listen address (overrides the config)");
ABSL_FLAG(std::string, port_file, "", "write the chosen ports here as JSON once listening");
ABSL_FLAG(std::string, learner, "", "learner address host:port (overrides the config)");
ABSL_FLAG(std::string, verifiers, "", "verifier target (overrides the config)");
ABSL_FLAG(std::string, name, "", "worker name (overrides the config; default: host name)");

namespace kforge {
namespace {

std::string HostName() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

int Run() {
  Logger log("rollout_worker");
  v1::RolloutWorkerConfig config;
  const ServerFlagOverrides overrides{absl::GetFlag(FLAGS_port), absl::GetFlag(FLAGS_metrics_port),
                                      absl::GetFlag(FLAGS_host)};
  if (absl::Status s = LoadProcessConfig(absl::GetFlag(FLAGS_config), overrides, &config,
                                         "rollout_worker_config");
      !s.ok()) {
    log.Error("invalid configuration", {{"error", s.message()}});
    return kExitConfigError;
  }
  if (!absl::GetFlag(FLAGS_learner).empty()) config.set_learner_address(absl::GetFlag(FLAGS_learner));
  if (!absl::GetFlag(FLAGS_verifiers).empty()) config.set_verifier_target(absl::GetFlag(FLAGS_verifiers));
  if (!absl::GetFlag(FLAGS_name).empty()) config.set_worker_name(absl::GetFlag(FLAGS_name));
  if (config.worker_name().empty()) config.set_worker_name(HostName());

  const TorchRuntimeInfo torch = DescribeTorchRuntime();
  log.Info("starting", {{"torch", torch.version}, {"cuda", torch.cuda_available},
                        {"device", config.device()}, {"learner", config.learner_address()}});

  auto registry = std::make_shared<prometheus::Registry>();
  absl::StatusOr<std::unique_ptr<ServiceHost>> host =
      ServiceHost::Create({.config = config.server(),
                           .component = "rollout_worker",
                           .registry = registry,
                           .port_file = absl::GetFlag(FLAGS_port_file)});
  if (!host.ok()) {
    log.Error("cannot start server", {{"error", host.status().message()}});
    return kExitRuntimeError;
  }
  ServiceHost* host_ptr = host->get();
  {
    LearnerLink link(config, absl::StrCat(HostName(), ":", host_ptr->grpc_port()),
                     [host_ptr](bool ready) { host_ptr->SetServing(ready); });
    const int sig = WaitForTerminationSignal();
    log.Info("shutting down", {{"signal", sig}});
  }
  (*host)->Shutdown();
  return kExitOk;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  kforge::BlockTerminationSignals();
  absl::SetProgramUsageMessage("kforge rollout worker");
  absl::ParseCommandLine(argc, argv);
  return kforge::Run();
}
