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
#include "absl/synchronization/mutex.h"
#include "common/security/channel_security.h"
#include "common/server/crash_report.h"
#include "common/server/host_name.h"
#include "common/server/process_main.h"
#include "common/server/service_host.h"
#include "common/server/termination_signals.h"
#include "model/torch_runtime.h"
#include "rollout_worker/learner_link.h"
#include "rollout_worker/rollout_metrics.h"
#include "rollout_worker/rollout_pipeline.h"
#include "model/policy_loader.h"

ABSL_FLAG(std::string, config, "",
          "RolloutWorkerConfig as JSON (proto/kforge/v1/service_config.proto)");
ABSL_FLAG(int, port, -1, "gRPC port (overrides the config; 0 picks a free one)");
ABSL_FLAG(int, metrics_port, -1, "HTTP /metrics port (overrides the config; 0 picks a free one)");
ABSL_FLAG(std::string, host, "", "listen address (overrides the config)");
ABSL_FLAG(std::string, port_file, "", "write the chosen ports here as JSON once listening");
ABSL_FLAG(std::string, learner, "", "learner address host:port (overrides the config)");
ABSL_FLAG(std::string, verifiers, "", "verifier target (overrides the config)");
ABSL_FLAG(std::string, name, "", "worker name (overrides the config; default: host name)");
ABSL_FLAG(std::string, model, "", "Hugging Face checkpoint folder (overrides the config)");
ABSL_FLAG(std::string, device, "", "cpu, cuda or cuda:N (overrides the config)");

namespace kforge {
namespace {

// Health follows two conditions set from different threads.
class Readiness {
 public:
  Readiness(ServiceHost* host, bool sampling) : host_(host), sampling_(sampling) {}
  void SetRegistered(bool registered) {
    absl::MutexLock lock(&mu_);
    registered_ = registered;
    host_->SetServing(registered_ && sampling_);
  }
  void SetSampling(bool sampling) {
    absl::MutexLock lock(&mu_);
    sampling_ = sampling;
    host_->SetServing(registered_ && sampling_);
  }

 private:
  ServiceHost* const host_;
  absl::Mutex mu_;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  bool sampling_ ABSL_GUARDED_BY(mu_);
};

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
  if (!absl::GetFlag(FLAGS_model).empty()) config.set_model_path(absl::GetFlag(FLAGS_model));
  if (!absl::GetFlag(FLAGS_device).empty()) config.set_device(absl::GetFlag(FLAGS_device));
  if (config.worker_name().empty()) config.set_worker_name(HostName());
  // How the learner and the verifiers are reached, checked before the model
  // loads: a token never goes to a non-loopback peer in plaintext.
  absl::StatusOr<ChannelSecurity> security = ChannelSecurity::ForPeers(config.server());
  if (security.ok()) security->set_reconnect_backoff_max(absl::Seconds(config.rpc().backoff_max_s()));
  absl::Status checked = security.status();
  if (checked.ok()) checked = security->CheckTarget(config.learner_address(), "learner_address");
  if (checked.ok()) checked = security->CheckTarget(config.verifier_target(), "verifier_target");
  if (!checked.ok()) {
    log.Error("invalid configuration", {{"error", checked.message()}});
    return kExitConfigError;
  }

  const TorchRuntimeInfo torch = DescribeTorchRuntime();
  log.Info("starting", {{"torch", torch.version}, {"cuda", torch.cuda_available},
                        {"device", config.device()}, {"learner", config.learner_address()},
                        {"verifier_affinity_slack", config.verifier_affinity_slack()},
                        {"to_peers", security->Describe()}});

  // The model loads before the server listens: once the worker registers
  // (and reports SERVING) it can sample. A model that does not load is a
  // configuration error.
  std::unique_ptr<LoadedPolicy> policy;
  if (!config.model_path().empty()) {
    absl::StatusOr<std::unique_ptr<LoadedPolicy>> loaded =
        LoadPolicy(config.model_path(), config.device(), config.dtype());
    if (!loaded.ok()) {
      log.Error("cannot load the model", {{"model", config.model_path()},
                                          {"error", loaded.status().message()}});
      return kExitConfigError;
    }
    policy = *std::move(loaded);
    log.Info("model loaded", {{"model", config.model_path()}, {"policy", policy->description}});
  } else {
    log.Warning("no model_path: registering without sampling");
  }

  auto registry = std::make_shared<prometheus::Registry>();
  RolloutMetrics metrics(*registry);
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
    // SERVING once registered and, with a model, once sampling is set up.
    Readiness readiness(host_ptr, /*sampling=*/policy == nullptr);
    LearnerLink link(config, absl::StrCat(HostName(), ":", host_ptr->grpc_port()),
                     policy != nullptr && RolloutPipeline::TakesPartInBroadcast(config),
                     [&readiness](bool ready) { readiness.SetRegistered(ready); }, *security);
    std::unique_ptr<RolloutPipeline> pipeline;
    if (policy != nullptr) {
      absl::StatusOr<std::unique_ptr<RolloutPipeline>> created =
          RolloutPipeline::Create(config, policy.get(), &link, &metrics, *security);
      if (!created.ok()) {
        log.Error("cannot start sampling", {{"error", created.status().message()}});
        (*host)->Shutdown();
        return kExitConfigError;
      }
      pipeline = *std::move(created);
      readiness.SetSampling(true);
    }
    const int sig = WaitForTerminationSignal();
    log.Info("shutting down", {{"signal", sig}});
  }
  (*host)->Shutdown();
  return kExitOk;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  kforge::InstallCrashReport(argv[0]);
  kforge::BlockTerminationSignals();
  absl::SetProgramUsageMessage("kforge rollout worker");
  absl::ParseCommandLine(argc, argv);
  return kforge::Run();
}
