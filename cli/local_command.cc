#include "cli/local_command.h"

#include <signal.h>

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
#include "model/checkpoint/tiny_model.h"

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
                                     std::vector<std::string> args, const LocalOptions& options) {
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
  auto channel = MakeChannel(service.address());
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
    KF_RETURN_IF_ERROR(WriteTinyModel({.out_dir = dir, .tasks_dir = SharedDataPath("tasks")})
                           .status());
    std::printf("kforge local: wrote the built-in tiny model to %s\n", dir.c_str());
  }
  return dir.string();
}

absl::Status StartAll(const LocalOptions& options, std::vector<Service>& services) {
  KF_ASSIGN_OR_RETURN(const std::string model, LocalModel(options));
  KF_ASSIGN_OR_RETURN(
      Service learner,
      StartService("learner", "kforge-learner",
                   {absl::StrCat("--port=", options.learner_port),
                    absl::StrCat("--state_dir=", (fs::path(options.run_dir) / "state").string())},
                   options));
  services.push_back(std::move(learner));
  std::vector<std::string> verifier_addresses;
  for (int i = 0; i < options.verifiers; ++i) {
    // Verifiers hand scored samples to the learner themselves.
    std::vector<std::string> args = {"--port=0",
                                     absl::StrCat("--learner=", services.front().address())};
    if (!options.python.empty()) args.push_back(absl::StrCat("--python=", options.python));
    KF_ASSIGN_OR_RETURN(Service verifier, StartService(absl::StrCat("verifier-", i),
                                                       "kforge-verifier", args, options));
    verifier_addresses.push_back(verifier.address());
    services.push_back(std::move(verifier));
  }
  for (int i = 0; i < options.rollout_workers; ++i) {
    KF_ASSIGN_OR_RETURN(
        Service rollout,
        StartService(absl::StrCat("rollout-", i), "kforge-rollout",
                     {"--port=0", absl::StrCat("--learner=", services.front().address()),
                      absl::StrCat("--verifiers=", absl::StrJoin(verifier_addresses, ",")),
                      absl::StrCat("--model=", model), absl::StrCat("--name=local-rollout-", i)},
                     options));
    services.push_back(std::move(rollout));
  }
  return absl::OkStatus();
}

void PrintTable(const std::vector<Service>& services) {
  std::printf("\n%-12s %-22s %-32s %s\n", "SERVICE", "GRPC", "METRICS", "LOG");
  for (const Service& s : services) {
    std::printf("%-12s %-22s %-32s %s\n", s.name.c_str(), s.address().c_str(),
                absl::StrCat("http://127.0.0.1:", s.ports.metrics_port(), "/metrics").c_str(),
                s.log_file.c_str());
  }
  const std::string learner = services.front().address();
  std::printf(
      "\nall services SERVING. Try:\n"
      "  grpcurl -plaintext %s list\n"
      "  kforge submit --server %s examples/job.json\n"
      "Press Ctrl-C to stop.\n",
      learner.c_str(), learner.c_str());
  std::fflush(stdout);
}

}  // namespace

int RunLocal(const LocalOptions& options) {
  std::error_code ec;
  fs::create_directories(options.run_dir, ec);
  if (ec) {
    std::fprintf(stderr, "kforge local: cannot create %s: %s\n", options.run_dir.c_str(),
                 ec.message().c_str());
    return kExitConfigError;
  }
  std::vector<Service> services;
  std::printf("kforge local: starting learner, %d verifier(s), %d rollout worker(s) in %s\n",
              options.verifiers, options.rollout_workers, options.run_dir.c_str());
  std::fflush(stdout);
  if (absl::Status started = StartAll(options, services); !started.ok()) {
    std::fprintf(stderr, "kforge local: %s\n", std::string(started.message()).c_str());
    StopAll(services);
    return kExitRuntimeError;
  }
  PrintTable(services);
  for (;;) {
    if (std::optional<int> sig = WaitForTerminationSignalFor(absl::Milliseconds(500))) {
      std::printf("\nkforge local: stopping (%s)\n", strsignal(*sig));
      StopAll(services);
      return kExitOk;
    }
    for (Service& service : services) {
      if (std::optional<ExitInfo> exit = service.process->Poll()) {
        std::fprintf(stderr, "kforge local: %s\n",
                     std::string(DiedError(service, *exit).message()).c_str());
        StopAll(services);
        return kExitRuntimeError;
      }
    }
  }
}

}  // namespace kforge
