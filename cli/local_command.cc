#include "cli/local_command.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/client/rpc_client.h"
#include "common/config/json_config.h"
#include "common/process/child_process.h"
#include "common/server/executable_path.h"
#include "common/server/process_main.h"
#include "common/server/termination_signals.h"
#include "common/status_macros.h"
#include "kforge/v1/service_config.pb.h"
#include "cli/local_job.h"
#include "cli/local_security.h"
#include "cli/tiny_model_command.h"
#include "common/process/state_lock.h"
#include "model/checkpoint/tiny_model.h"
#include "model/torch_runtime.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// How long a service gets to drain on Ctrl-C before it is killed.
constexpr absl::Duration kStopGrace = absl::Seconds(15);

struct Service {
  std::string name;  // "learner", "verifier-0", ...
  std::string log_file;
  std::unique_ptr<ChildProcess> process;
  v1::ServingPorts ports;
  std::string address() const { return absl::StrCat("127.0.0.1:", ports.grpc_port()); }
};

std::string LogTail(const std::string& path, int lines) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return "";
  std::vector<std::string> all = absl::StrSplit(*text, '\n', absl::SkipEmpty());
  const size_t from = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  return absl::StrJoin(all.begin() + static_cast<long>(from), all.end(), "\n");
}

absl::Status DiedError(const Service& service, const ExitInfo& exit) {
  return absl::UnavailableError(absl::StrCat(service.name, " exited (", exit.Describe(),
                                             "); end of ", service.log_file, ":\n",
                                             LogTail(service.log_file, 15)));
}

// Starts one service binary and waits until it listens and reports SERVING.
absl::StatusOr<Service> StartService(const std::string& name, const std::string& binary,
                                     std::vector<std::string> args, const LocalOptions& options,
                                     const LocalSecurity& security) {
  Service service;
  service.name = name;
  service.log_file = (fs::path(options.run_dir) / (name + ".log")).string();
  const std::string port_file = (fs::path(options.run_dir) / (name + ".ports")).string();
  fs::remove(port_file);
  std::vector<std::string> argv = {(ExecutableDir() / binary).string(), "--host=127.0.0.1",
                                   "--metrics_port=0", absl::StrCat("--port_file=", port_file)};
  argv.insert(argv.end(), args.begin(), args.end());
  KF_ASSIGN_OR_RETURN(service.process,
                      ChildProcess::Spawn({.argv = argv, .log_file = service.log_file}));
  const absl::Time deadline = absl::Now() + absl::Seconds(options.start_timeout_s);
  while (!fs::exists(port_file)) {
    if (auto exit = service.process->Poll()) return DiedError(service, *exit);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(name, " did not start listening; see ",
                                                      service.log_file));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  KF_ASSIGN_OR_RETURN(std::string ports_json, ReadFileToString(port_file));
  KF_RETURN_IF_ERROR(ParseJsonMessage(ports_json, &service.ports));
  auto channel = security.health().Connect(service.address());
  for (;;) {
    if (auto exit = service.process->Poll()) return DiedError(service, *exit);
    if (WaitForServing(channel, absl::Seconds(1)).ok()) break;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(name, " did not become SERVING; see ", service.log_file));
    }
  }
  return service;
}

void StopAll(std::vector<Service>& services) {
  // Reverse start order: workers first, the learner last.
  for (auto it = services.rbegin(); it != services.rend(); ++it) it->process->Signal(SIGTERM);
  for (auto it = services.rbegin(); it != services.rend(); ++it) {
    const ExitInfo exit = it->process->Terminate(kStopGrace);
    std::printf("  stopped %-12s (%s)\n", it->name.c_str(), exit.Describe().c_str());
  }
}

// The model the rollout workers load: the one given, or the built-in tiny
// model, written once into the run folder.
absl::StatusOr<std::string> LocalModel(const LocalOptions& options) {
  if (!options.model.empty()) return options.model;
  const fs::path dir = fs::path(options.run_dir) / "tiny-model";
  if (!fs::exists(dir / "config.json")) {
    std::error_code ec;
    fs::remove_all(dir, ec);  // a half-written folder from an interrupted run
    KF_RETURN_IF_ERROR(
        WriteTinyModel({.out_dir = dir, .seed = options.seed, .tasks_dir = BuiltinTinyModelCorpus()})
            .status());
    std::printf("kforge local: wrote the built-in tiny model to %s\n", dir.c_str());
  }
  return dir.string();
}

// Where rollout worker `index` samples: with several GPUs, on one other than
// the learner's (cuda:0), so the learner's NCCL weight broadcast can reach it
// (NCCL needs a GPU per rank); with one GPU or none, where everything runs.
std::string RolloutDevice(const std::string& device, int gpus, int index) {
  if (gpus < 2) return device;
  return absl::StrCat("cuda:", 1 + index % (gpus - 1));
}

// Where verifier `index` runs candidates: one verifier per GPU, round
// robin, so every GPU of the node verifies (timing takes a GPU alone, so two
// verifiers never time on one GPU unless there are more verifiers than GPUs).
std::string VerifierDevice(const std::string& device, int gpus, int index) {
  if (gpus < 2) return device;
  return absl::StrCat("cuda:", index % gpus);
}

// --verifiers 0: one per GPU, one on the CPU.
int VerifierCount(const LocalOptions& options, int gpus) {
  return options.verifiers > 0 ? options.verifiers : std::max(1, gpus);
}

// The learner's model and task roots: the run folder (the tiny model) and
// the folder of --model, the built-in tasks, and what the flags add.
std::vector<std::string> RootArgs(const LocalOptions& options) {
  std::vector<std::string> models = {fs::absolute(options.run_dir).string()};
  if (!options.model.empty()) models.push_back(fs::absolute(options.model).string());
  models.insert(models.end(), options.model_roots.begin(), options.model_roots.end());
  std::vector<std::string> tasks = {SharedDataPath("tasks")};
  tasks.insert(tasks.end(), options.task_roots.begin(), options.task_roots.end());
  return {absl::StrCat("--model_roots=", absl::StrJoin(models, ",")),
          absl::StrCat("--task_roots=", absl::StrJoin(tasks, ","))};
}

absl::Status StartAll(const LocalOptions& options, const LocalSecurity& security,
                      const std::string& model, const std::string& device, int gpus,
                      std::vector<Service>& services) {
  std::vector<std::string> learner_args = {
      absl::StrCat("--port=", options.learner_port),
      absl::StrCat("--state_dir=", (fs::path(options.run_dir) / "state").string())};
  for (std::vector<std::string> more : {RootArgs(options), security.ServiceArgs("learner")}) {
    learner_args.insert(learner_args.end(), more.begin(), more.end());
  }
  KF_ASSIGN_OR_RETURN(Service learner, StartService("learner", "kforge-learner", learner_args,
                                                    options, security));
  services.push_back(std::move(learner));
  std::vector<std::string> verifier_addresses;
  for (int i = 0; i < VerifierCount(options, gpus); ++i) {
    // Verifiers hand scored samples to the learner themselves.
    std::vector<std::string> args = {"--port=0",
                                     absl::StrCat("--learner=", services.front().address())};
    if (!options.python.empty()) args.push_back(absl::StrCat("--python=", options.python));
    args.push_back(absl::StrCat("--device=", VerifierDevice(device, gpus, i)));
    for (const std::string& arg : security.ServiceArgs("verifier")) args.push_back(arg);
    KF_ASSIGN_OR_RETURN(Service verifier, StartService(absl::StrCat("verifier-", i),
                                                       "kforge-verifier", args, options, security));
    verifier_addresses.push_back(verifier.address());
    services.push_back(std::move(verifier));
  }
  for (int i = 0; i < options.rollout_workers; ++i) {
    std::vector<std::string> args = {
        "--port=0", absl::StrCat("--learner=", services.front().address()),
        absl::StrCat("--verifiers=", absl::StrJoin(verifier_addresses, ",")),
        absl::StrCat("--model=", model), absl::StrCat("--name=local-rollout-", i),
        absl::StrCat("--device=", RolloutDevice(device, gpus, i))};
    for (const std::string& arg : security.ServiceArgs("rollout")) args.push_back(arg);
    KF_ASSIGN_OR_RETURN(Service rollout, StartService(absl::StrCat("rollout-", i), "kforge-rollout",
                                                      args, options, security));
    services.push_back(std::move(rollout));
  }
  return absl::OkStatus();
}

void PrintTable(const std::vector<Service>& services, bool serve, const LocalSecurity& security) {
  std::printf("\n%-12s %-22s %-32s %s\n", "SERVICE", "GRPC", "METRICS", "LOG");
  for (const Service& s : services) {
    std::printf("%-12s %-22s %-32s %s\n", s.name.c_str(), s.address().c_str(),
                absl::StrCat("http://127.0.0.1:", s.ports.metrics_port(), "/metrics").c_str(),
                s.log_file.c_str());
  }
  const std::string learner = services.front().address();
  std::printf("\nall services SERVING. Try:\n  grpcurl %s %s list\n",
              security.GrpcurlFlags().c_str(), learner.c_str());
  if (serve) {
    std::printf("  kforge submit --server %s%s examples/local-job.json\n", learner.c_str(),
                security.CliFlags().c_str());
  }
  std::printf("Press Ctrl-C to stop.\n\n");
  std::fflush(stdout);
}

// The job to run: --job FILE, or the default one.
absl::StatusOr<v1::JobSpec> LocalJobSpec(const LocalOptions& options, const std::string& model,
                                         bool gpu) {
  if (options.short_job && !options.job_file.empty()) {
    return absl::InvalidArgumentError("--short and --job exclude each other");
  }
  if (options.short_job) return ShortLocalJob(model, gpu, options.seed);
  if (options.job_file.empty()) return DefaultLocalJob(model, gpu, options.seed);
  KF_ASSIGN_OR_RETURN(std::string json, ReadFileToString(options.job_file));
  v1::JobSpec spec;
  if (absl::Status s = ParseJsonMessage(json, &spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(options.job_file, ": ", s.message()));
  }
  // A job file may leave the model to kforge local: the one its workers load.
  if (spec.model_path().empty()) spec.set_model_path(model);
  return spec;
}

// A child that exited, as an error naming it.
absl::Status CheckChildren(std::vector<Service>& services) {
  for (Service& service : services) {
    if (std::optional<ExitInfo> exit = service.process->Poll()) return DiedError(service, *exit);
  }
  return absl::OkStatus();
}

// Runs the job to its end (or until a signal); the exit code.
int RunJob(const LocalOptions& options, const LocalSecurity& security, const v1::JobSpec& spec,
           std::vector<Service>& services) {
  LocalJobWatcher watcher(services.front().address(), security.users());
  if (absl::StatusOr<std::string> id = watcher.SubmitOrResume(spec); !id.ok()) {
    std::fprintf(stderr, "kforge local: %s\n", std::string(id.status().message()).c_str());
    StopAll(services);
    return kExitRuntimeError;
  }
  for (;;) {
    if (std::optional<int> sig = WaitForTerminationSignalFor(absl::Milliseconds(500))) {
      std::printf("\nkforge local: stopping (%s); %s resumes from its checkpoint at the next "
                  "`kforge local --run_dir %s`\n",
                  strsignal(*sig), watcher.job().id().c_str(), options.run_dir.c_str());
      StopAll(services);
      return kExitOk;
    }
    absl::Status children = CheckChildren(services);
    absl::StatusOr<bool> ended = children.ok() ? watcher.Poll() : children;
    if (!ended.ok()) {
      std::fprintf(stderr, "\nkforge local: %s\n", std::string(ended.status().message()).c_str());
      StopAll(services);
      return kExitRuntimeError;
    }
    if (*ended) {
      watcher.PrintSummary();
      StopAll(services);
      return watcher.job().state() == v1::JOB_SUCCEEDED ? kExitOk : kExitRuntimeError;
    }
  }
}

// Serves until a signal.
int Serve(std::vector<Service>& services) {
  for (;;) {
    if (std::optional<int> sig = WaitForTerminationSignalFor(absl::Milliseconds(500))) {
      std::printf("\nkforge local: stopping (%s)\n", strsignal(*sig));
      StopAll(services);
      return kExitOk;
    }
    if (absl::Status s = CheckChildren(services); !s.ok()) {
      std::fprintf(stderr, "kforge local: %s\n", std::string(s.message()).c_str());
      StopAll(services);
      return kExitRuntimeError;
    }
  }
}

}  // namespace

int RunLocal(const LocalOptions& options) {
  // One kforge local per run folder: taken before anything in it is touched
  // (logs, port files, the tiny model, the learner's state).
  absl::StatusOr<std::unique_ptr<StateLock>> lock =
      StateLock::Acquire(options.run_dir, "kforge local", "kforge-local.lock");
  if (!lock.ok()) {
    std::fprintf(stderr, "kforge local: %s\n", std::string(lock.status().message()).c_str());
    return kExitConfigError;
  }
  absl::StatusOr<LocalSecurity> security =
      LocalSecurity::Prepare(options.run_dir, options.tls_dir, options.token_file);
  if (!security.ok()) {
    std::fprintf(stderr, "kforge local: %s\n", std::string(security.status().message()).c_str());
    return kExitConfigError;
  }
  // A GPU machine runs everything on its first GPU, with Triton candidates
  // (rollout workers on the others where there are several: RolloutDevice).
  const bool gpu = DescribeTorchRuntime().cuda_available;
  const std::string device = gpu ? "cuda:0" : "cpu";
  absl::StatusOr<std::string> model = LocalModel(options);
  absl::StatusOr<v1::JobSpec> spec =
      model.ok() ? LocalJobSpec(options, *model, gpu) : absl::StatusOr<v1::JobSpec>(model.status());
  if (!spec.ok()) {
    std::fprintf(stderr, "kforge local: %s\n", std::string(spec.status().message()).c_str());
    return kExitConfigError;
  }
  std::vector<Service> services;
  const int gpus = static_cast<int>(DescribeTorchRuntime().devices.size());
  std::printf("kforge local: starting learner, %d verifier(s), %d rollout worker(s) on %s "
              "(%d GPU(s)) in %s\n",
              VerifierCount(options, gpus), options.rollout_workers, device.c_str(), gpus,
              options.run_dir.c_str());
  std::printf("kforge local: %s\n", security->Describe().c_str());
  std::fflush(stdout);
  // Rollout workers build their model from the job's checkpoint: the
  // learner's weights reach them by snapshot or broadcast, which fit only
  // the architecture they were made for.
  const std::string rollout_model = spec->model_path().empty() ? *model : spec->model_path();
  if (absl::Status started = StartAll(options, *security, rollout_model, device, gpus, services);
      !started.ok()) {
    std::fprintf(stderr, "kforge local: %s\n", std::string(started.message()).c_str());
    StopAll(services);
    return kExitRuntimeError;
  }
  PrintTable(services, options.serve, *security);
  return options.serve ? Serve(services) : RunJob(options, *security, *spec, services);
}

}  // namespace kforge
