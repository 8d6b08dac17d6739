// kforge-learner: owns jobs (JobService), the rollout-worker registry and,
// with the trainer, the policy. See proto/kforge/v1/job_service.proto.
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/process/state_lock.h"
#include "common/security/call_auth.h"
#include "common/server/crash_report.h"
#include "common/config/proto_defaults.h"
#include "common/server/executable_path.h"
#include "common/server/periodic_thread.h"
#include "common/server/process_main.h"
#include "common/server/service_host.h"
#include "common/server/termination_signals.h"
#include "learner/job_service.h"
#include "learner/jobs/job_registry.h"
#include "learner/learner_metrics.h"
#include "learner/learner_service.h"
#include "learner/rollout/group_tracker.h"
#include "learner/training/job_runner.h"
#include "learner/weights/weight_broadcaster.h"
#include "learner/weights/weight_publisher.h"
#include "learner/workers/worker_registry.h"
#include "model/torch_runtime.h"

ABSL_FLAG(std::string, config, "", "LearnerConfig as JSON (proto/kforge/v1/service_config.proto)");
ABSL_FLAG(int, port, -1, "gRPC port (overrides the config; 0 picks a free one)");
ABSL_FLAG(int, metrics_port, -1, "HTTP /metrics port (overrides the config; 0 picks a free one)");
ABSL_FLAG(std::string, host, "", "listen address (overrides the config)");
ABSL_FLAG(std::string, port_file, "", "write the chosen ports here as JSON once listening");
ABSL_FLAG(std::string, state_dir, "", "job and checkpoint folder (overrides the config)");
ABSL_FLAG(std::vector<std::string>, model_roots, {},
          "folders JobSpec.model_path may name (overrides the config; default: the state folder)");
ABSL_FLAG(std::vector<std::string>, task_roots, {},
          "folders task sets may be read from (overrides the config; default: the built-in "
          "tasks folder)");
ABSL_FLAG(std::vector<std::string>, output_roots, {},
          "folders JobSpec.checkpoint.dir may name (overrides the config; default: the state "
          "folder)");

namespace kforge {
namespace {

// The config's roots, overridden by the flags, with their defaults.
void ApplyRoots(v1::LearnerConfig& config) {
  const auto set = [](google::protobuf::RepeatedPtrField<std::string>* field,
                      const std::vector<std::string>& flag, const std::string& fallback) {
    if (!flag.empty()) *field = {flag.begin(), flag.end()};
    if (field->empty()) field->Add(std::string(fallback));
  };
  set(config.mutable_model_roots(), absl::GetFlag(FLAGS_model_roots), config.state_dir());
  set(config.mutable_task_roots(), absl::GetFlag(FLAGS_task_roots), config.builtin_tasks_dir());
  set(config.mutable_output_roots(), absl::GetFlag(FLAGS_output_roots), config.state_dir());
}

JobPathRoots MakeRoots(const v1::LearnerConfig& config) {
  const auto list = [](const google::protobuf::RepeatedPtrField<std::string>& field) {
    return std::vector<std::string>(field.begin(), field.end());
  };
  return {.models = PathRoots::Create(list(config.model_roots()), "model roots (--model_roots)"),
          .tasks = PathRoots::Create(list(config.task_roots()), "task roots (--task_roots)"),
          .outputs = PathRoots::Create(list(config.output_roots()), "output roots (--output_roots)"),
          .state_dir = config.state_dir()};
}

int Run() {
  Logger log("learner");
  v1::LearnerConfig config;
  const ServerFlagOverrides overrides{absl::GetFlag(FLAGS_port), absl::GetFlag(FLAGS_metrics_port),
                                      absl::GetFlag(FLAGS_host)};
  if (absl::Status s = LoadProcessConfig(absl::GetFlag(FLAGS_config), overrides, &config,
                                         "learner_config");
      !s.ok()) {
    log.Error("invalid configuration", {{"error", s.message()}});
    return kExitConfigError;
  }
  if (!absl::GetFlag(FLAGS_state_dir).empty()) config.set_state_dir(absl::GetFlag(FLAGS_state_dir));
  if (config.builtin_tasks_dir().empty()) config.set_builtin_tasks_dir(SharedDataPath("tasks"));
  ApplyRoots(config);
  // One learner per state folder, before anything in it is touched.
  absl::StatusOr<std::unique_ptr<StateLock>> lock =
      StateLock::Acquire(config.state_dir(), "kforge-learner");
  if (!lock.ok()) {
    log.Error("cannot own the state folder", {{"error", lock.status().message()}});
    return kExitRuntimeError;
  }

  const TorchRuntimeInfo torch = DescribeTorchRuntime();
  log.Info("starting", {{"torch", torch.version}, {"cuda", torch.cuda_available},
                        {"gpus", torch.devices.size()}, {"state_dir", config.state_dir()}});

  auto registry = std::make_shared<prometheus::Registry>();
  absl::StatusOr<std::unique_ptr<CallAuthorizer>> authorizer = CallAuthorizer::Create(
      {.config = config.server(), .serves_users = true, .serves_peers = true,
       .registry = registry.get()});
  if (!authorizer.ok()) {
    log.Error("invalid configuration", {{"error", authorizer.status().message()}});
    return kExitConfigError;
  }
  const JobPathRoots roots = MakeRoots(config);
  log.Info("access", {{"job_service", (*authorizer)->users_need()},
                      {"learner_service", (*authorizer)->peers_need()},
                      {"model_roots", roots.models.Describe()},
                      {"task_roots", roots.tasks.Describe()},
                      {"output_roots", roots.outputs.Describe()}});
  LearnerMetrics metrics(*registry);
  absl::StatusOr<std::unique_ptr<JobRegistry>> jobs = JobRegistry::Create(
      {.state_dir = config.state_dir(),
       .max_queued_jobs = config.max_queued_jobs(),
       .watch_buffer_events = config.watch_buffer_events()},
      &metrics);
  if (!jobs.ok()) {
    log.Error("cannot open job state", {{"error", jobs.status().message()}});
    return kExitRuntimeError;
  }
  WorkerRegistry workers(absl::Seconds(config.worker_timeout_s()), &metrics);
  JobServiceImpl job_service(
      jobs->get(), &metrics, {.builtin_tasks_root = config.builtin_tasks_dir(), .roots = &roots},
      &config, (*authorizer)->UserGuard(v1::JobService::service_full_name()));
  // Until a job sets its own bounds, the JobSpec defaults apply.
  v1::JobSpec job_defaults;
  (void)ApplyProtoDefaults(&job_defaults);
  GroupTracker groups({.group_timeout = absl::Seconds(job_defaults.group_timeout_s()),
                       .max_staleness = job_defaults.max_staleness(),
                       .max_buffered_samples = config.max_buffered_samples()});
  WeightPublisher weights;
  WeightBroadcaster broadcaster(config, &metrics);
  if (std::string why = broadcaster.NotMemberReason(); !why.empty()) {
    log.Info("weights go to rollout workers over gRPC only", {{"reason", why}});
  }
  LearnerServiceImpl learner_service(
      &workers, &groups, &weights, &broadcaster, &metrics, &config,
      (*authorizer)->PeerGuard(v1::LearnerService::service_full_name()));

  absl::StatusOr<std::unique_ptr<ServiceHost>> host = ServiceHost::Create(
      {.config = config.server(),
       .component = "learner",
       .services = {&job_service, &learner_service},
       .service_names = {v1::JobService::service_full_name(),
                         v1::LearnerService::service_full_name()},
       .registry = registry,
       .port_file = absl::GetFlag(FLAGS_port_file)});
  if (!host.ok()) {
    log.Error("cannot start server", {{"error", host.status().message()}});
    return kExitRuntimeError;
  }
  PeriodicThread reaper("kf-worker-reap", absl::Seconds(config.heartbeat_interval_s()), [&] {
    for (const std::string& id : workers.ExpireStale()) {
      log.Warning("rollout worker expired", {{"worker_id", id}});
      groups.WorkerGone(id);
      broadcaster.Remove(id);
    }
    groups.Expire(absl::Now());
    metrics.UpdateGroups(groups.stats());
  });
  // Job state is loaded; the learner can take jobs. The trainer resumes a
  // job left RUNNING, then takes queued ones.
  JobRunner runner({.jobs = jobs->get(), .groups = &groups, .weights = &weights,
                    .broadcaster = &broadcaster, .metrics = &metrics, .config = &config});
  (*host)->SetServing(true);
  const int sig = WaitForTerminationSignal();
  log.Info("shutting down", {{"signal", sig}});
  // The running job checkpoints at its step boundary and stays RUNNING, so
  // the next start resumes it; then the server drains.
  runner.Stop();
  (*host)->Shutdown();
  return kExitOk;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  kforge::InstallCrashReport(argv[0]);
  kforge::BlockTerminationSignals();
  absl::SetProgramUsageMessage("kforge learner: serves JobService and LearnerService");
  absl::ParseCommandLine(argc, argv);
  return kforge::Run();
}
