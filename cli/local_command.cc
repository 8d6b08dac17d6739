#include "cli/local_command.h"

#include <netinet/in.h>
#include <signal.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
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
#include "common/process/unique_fd.h"
#include "model/checkpoint/tiny_model.h"
#include "model/torch_runtime.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

struct Service {
  std::string name;  // "learner", "verifier-0", ...
  std::string binary;
  std::vector<std::string> args;  // all but the port flags
  std::string log_file;
  std::unique_ptr<ChildProcess> process;  // null while it is down
  absl::Time spawned;                     // its start-up deadline counts from here
  v1::ServingPorts ports;
  // Supervision: when it died within the restart window, and when it is
  // started again.
  std::deque<absl::Time> deaths;
  absl::Time restart_at = absl::InfiniteFuture();
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

// Ctrl-C or SIGTERM, noticed by whatever kforge local was waiting for: a
// service starting, or the job.
class StopRequest {
 public:
  // Waits up to `timeout` for a termination signal; true once one came.
  bool Wait(absl::Duration timeout) {
    if (!signal_.has_value()) signal_ = WaitForTerminationSignalFor(timeout);
    return signal_.has_value();
  }
  std::optional<int> signal() const { return signal_; }

 private:
  std::optional<int> signal_;
};

// A free loopback port below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), so a restarted service gets its port
// back: no outgoing connection can have taken it meanwhile, and a peer that
// keeps dialling it while it is down cannot connect to itself.
absl::StatusOr<int> PickServicePort() {
  int low = 32768;
  if (absl::StatusOr<std::string> range = ReadFileToString("/proc/sys/net/ipv4/ip_local_port_range");
      range.ok()) {
    std::vector<std::string> parts = absl::StrSplit(*range, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
    if (!parts.empty()) (void)absl::SimpleAtoi(parts[0], &low);
  }
  // Registered services rarely sit this high; below 10000 many do.
  constexpr int kFirstPort = 10000;
  if (low <= kFirstPort + 1) return 0;  // no room below the range: any free port
  absl::BitGen random;
  for (int tries = 0; tries < 200; ++tries) {
    const int port = absl::Uniform(random, kFirstPort, low);
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) return port;
  }
  return 0;
}

// Starts (or starts again) one service binary on `port`, without waiting
// for it: AwaitServing does. Services of one kind start together, since a
// verifier spends most of its start-up checking its Python and the GPU, and
// one after another they cost their sum.
absl::Status Spawn(Service& service, int port, const LocalOptions& options) {
  const std::string& name = service.name;
  const std::string port_file = (fs::path(options.run_dir) / (name + ".ports")).string();
  fs::remove(port_file);
  std::vector<std::string> argv = {(ExecutableDir() / service.binary).string(),
                                   "--host=127.0.0.1", "--metrics_port=0",
                                   absl::StrCat("--port_file=", port_file),
                                   absl::StrCat("--port=", port)};
  argv.insert(argv.end(), service.args.begin(), service.args.end());
  // Spawned from the main thread, which lives as long as kforge local: a
  // kforge local killed with -9 takes its services with it.
  KF_ASSIGN_OR_RETURN(service.process,
                      ChildProcess::Spawn({.argv = argv, .log_file = service.log_file,
                                           .die_with_parent = true}));
  service.spawned = absl::Now();
  return absl::OkStatus();
}

// Waits until a spawned service listens and reports SERVING, at most
// start_timeout_s from its spawn; CANCELLED when a termination signal comes
// first (`stop` holds it).
absl::Status AwaitServing(Service& service, const LocalOptions& options,
                          const LocalSecurity& security, StopRequest& stop) {
  const std::string& name = service.name;
  const std::string port_file = (fs::path(options.run_dir) / (name + ".ports")).string();
  const absl::Time deadline = service.spawned + absl::Seconds(options.start_timeout_s);
  while (!fs::exists(port_file)) {
    if (auto exit = service.process->Poll()) return DiedError(service, *exit);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(name, " did not start listening; see ",
                                                      service.log_file));
    }
    if (stop.Wait(absl::Milliseconds(50))) return absl::CancelledError("stopping");
  }
  KF_ASSIGN_OR_RETURN(std::string ports_json, ReadFileToString(port_file));
  KF_RETURN_IF_ERROR(ParseJsonMessage(ports_json, &service.ports));
  auto channel = security.health().Connect(service.address());
  for (;;) {
    if (auto exit = service.process->Poll()) return DiedError(service, *exit);
    if (WaitForServing(channel, absl::Seconds(1)).ok()) break;
    if (stop.Wait(absl::ZeroDuration())) return absl::CancelledError("stopping");
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(name, " did not become SERVING; see ", service.log_file));
    }
  }
  return absl::OkStatus();
}

absl::Status Launch(Service& service, int port, const LocalOptions& options,
                    const LocalSecurity& security, StopRequest& stop) {
  KF_RETURN_IF_ERROR(Spawn(service, port, options));
  return AwaitServing(service, options, security, stop);
}

// Spawns one service, not waiting for it; `port` 0: one PickServicePort
// chooses, other than those in `taken` (services spawned together have not
// bound theirs yet, so the free-port probe alone could hand one out twice).
absl::StatusOr<Service> SpawnService(const std::string& name, const std::string& binary, int port,
                                     std::vector<std::string> args, const LocalOptions& options,
                                     std::set<int>& taken) {
  Service service;
  service.name = name;
  service.binary = binary;
  service.args = std::move(args);
  service.log_file = (fs::path(options.run_dir) / (name + ".log")).string();
  while (port == 0 || taken.contains(port)) {
    KF_ASSIGN_OR_RETURN(port, PickServicePort());
  }
  taken.insert(port);
  KF_RETURN_IF_ERROR(Spawn(service, port, options));
  return service;
}

// Waits for services[from..] to serve. Those spawned are in `services`
// either way, so a failure here still stops them all.
absl::Status AwaitAll(std::vector<Service>& services, size_t from, const LocalOptions& options,
                      const LocalSecurity& security, StopRequest& stop) {
  for (size_t i = from; i < services.size(); ++i) {
    KF_RETURN_IF_ERROR(AwaitServing(services[i], options, security, stop));
  }
  return absl::OkStatus();
}

// Each service gets options.stop_grace_s to drain and exit on SIGTERM
// before it is killed: the learner writes its newest state as a checkpoint
// then.
void StopAll(std::vector<Service>& services, const LocalOptions& options) {
  const absl::Duration grace = absl::Seconds(options.stop_grace_s);
  // Reverse start order: workers first, the learner last.
  for (auto it = services.rbegin(); it != services.rend(); ++it) {
    if (it->process != nullptr) it->process->Signal(SIGTERM);
  }
  for (auto it = services.rbegin(); it != services.rend(); ++it) {
    if (it->process == nullptr) continue;
    const ExitInfo exit = it->process->Terminate(grace);
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

// The CPU cores this process may run on (its affinity mask: a container's
// cpuset, taskset), which the machine's count overstates.
int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// --verifier_slots 0: half the cores shared among the verifiers (each
// candidate in flight is a CPU process of its own, compiling or checking),
// 2 to 8 each. On a 64-core node with four GPUs a verifier checks 8 at once;
// on 2 cores, its default 2.
int VerifierSlots(const LocalOptions& options, int verifiers) {
  if (options.verifier_slots > 0) return options.verifier_slots;
  return std::clamp(AvailableCores() / (2 * std::max(1, verifiers)), 2, 8);
}

// Each verifier's reference cache on a GPU node: at least the default
// 8 GiB, more where a quarter of the host's physical memory shared among the
// verifiers allows, up to 32 GiB (a container's memory limit is not looked
// at: set the verifier's config or --reference_cache_gib below it there).
// A task's reference epoch at full KernelBench sizes holds 1-3 GiB (its
// input sets, outputs and the inputs' shared copies), and an epoch dropped
// for room is made again, seconds of GPU and copying, by its next candidate.
int ReferenceCacheGib(int verifiers) {
  const int64_t pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const int64_t gib = pages > 0 && page > 0 ? pages * page >> 30 : 0;
  return static_cast<int>(std::clamp<int64_t>(gib / (4 * std::max(1, verifiers)), 8, 32));
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
                      std::vector<Service>& services, StopRequest& stop) {
  std::vector<std::string> learner_args = {
      absl::StrCat("--state_dir=", (fs::path(options.run_dir) / "state").string())};
  for (std::vector<std::string> more : {RootArgs(options), security.ServiceArgs("learner")}) {
    learner_args.insert(learner_args.end(), more.begin(), more.end());
  }
  std::set<int> ports;
  KF_ASSIGN_OR_RETURN(Service learner, SpawnService("learner", "kforge-learner",
                                                    options.learner_port, learner_args, options,
                                                    ports));
  services.push_back(std::move(learner));
  KF_RETURN_IF_ERROR(AwaitAll(services, 0, options, security, stop));
  const std::string learner_address = services.front().address();
  size_t first = services.size();
  const int verifiers = VerifierCount(options, gpus);
  const int slots = VerifierSlots(options, verifiers);
  for (int i = 0; i < verifiers; ++i) {
    // Verifiers hand scored samples to the learner themselves.
    std::vector<std::string> args = {absl::StrCat("--learner=", learner_address)};
    if (!options.python.empty()) args.push_back(absl::StrCat("--python=", options.python));
    args.push_back(absl::StrCat("--device=", VerifierDevice(device, gpus, i)));
    args.push_back(absl::StrCat("--max_concurrent=", slots));
    args.push_back(absl::StrCat("--spare_sandboxes=", slots));
    if (gpus > 0) {
      args.push_back(absl::StrCat("--reference_cache_gib=", ReferenceCacheGib(verifiers)));
    }
    for (const std::string& arg : security.ServiceArgs("verifier")) args.push_back(arg);
    KF_ASSIGN_OR_RETURN(Service verifier, SpawnService(absl::StrCat("verifier-", i),
                                                       "kforge-verifier", 0, args, options, ports));
    services.push_back(std::move(verifier));
  }
  KF_RETURN_IF_ERROR(AwaitAll(services, first, options, security, stop));
  std::vector<std::string> verifier_addresses;
  for (size_t i = first; i < services.size(); ++i) {
    verifier_addresses.push_back(services[i].address());
  }
  first = services.size();
  for (int i = 0; i < options.rollout_workers; ++i) {
    std::vector<std::string> args = {
        absl::StrCat("--learner=", learner_address),
        absl::StrCat("--verifiers=", absl::StrJoin(verifier_addresses, ",")),
        absl::StrCat("--model=", model), absl::StrCat("--name=local-rollout-", i),
        absl::StrCat("--device=", RolloutDevice(device, gpus, i))};
    if (!options.rollout_config.empty()) {
      args.push_back(absl::StrCat("--config=", fs::absolute(options.rollout_config).string()));
    }
    for (const std::string& arg : security.ServiceArgs("rollout")) args.push_back(arg);
    KF_ASSIGN_OR_RETURN(Service rollout, SpawnService(absl::StrCat("rollout-", i),
                                                      "kforge-rollout", 0, args, options, ports));
    services.push_back(std::move(rollout));
  }
  return AwaitAll(services, first, options, security, stop);
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

// Keeps every child running, as Kubernetes would restart a pod: a child
// that exits (any signal, any exit code) is started again after a back-off
// (restart_backoff_s, doubling with each death in the window), on the same
// port, so its peers reconnect to the address they know: rollout workers
// and verifiers re-register and reopen their streams, a learner resumes the
// running job from its last checkpoint. A child that dies more than
// max_restarts times within restart_window_s is an error naming it and the
// end of its log. Runs on the main thread (Launch's die_with_parent).
class Supervisor {
 public:
  Supervisor(const LocalOptions& options, const LocalSecurity& security,
             std::vector<Service>& services, StopRequest& stop)
      : options_(options), security_(security), services_(services), stop_(stop) {}

  // Notices deaths and restarts what is due. Blocks while a child starts;
  // CANCELLED when a termination signal comes meanwhile (stop_ holds it).
  absl::Status Tend() {
    for (Service& service : services_) {
      const absl::Time now = absl::Now();
      if (service.process != nullptr) {
        std::optional<ExitInfo> exit = service.process->Poll();
        if (!exit.has_value()) continue;
        KF_RETURN_IF_ERROR(Died(service,
                                absl::StrCat(service.name, " exited (", exit->Describe(),
                                             "); log: ", service.log_file),
                                DiedError(service, *exit), now));
      }
      if (service.process == nullptr && now >= service.restart_at) {
        const absl::Status started =
            Launch(service, service.ports.grpc_port(), options_, security_, stop_);
        if (absl::IsCancelled(started)) return started;
        if (!started.ok()) {
          service.process.reset();  // killed with its group, reaped
          KF_RETURN_IF_ERROR(Died(service, std::string(started.message()), started, absl::Now()));
          continue;
        }
        service.restart_at = absl::InfiniteFuture();
        std::printf("kforge local: %s restarted on %s (metrics http://127.0.0.1:%d/metrics)\n",
                    service.name.c_str(), service.address().c_str(), service.ports.metrics_port());
        std::fflush(stdout);
      }
    }
    return absl::OkStatus();
  }

  // Whether a child is down (dead, or waiting for its restart).
  bool AnyDown() const {
    return std::any_of(services_.begin(), services_.end(),
                       [](const Service& s) { return s.process == nullptr; });
  }

 private:
  // `said` is the one-line notice; `why` the error, with the end of the
  // log, given when the service has died too often.
  absl::Status Died(Service& service, const std::string& said, const absl::Status& why,
                    absl::Time now) {
    service.process.reset();
    const absl::Duration window = absl::Seconds(options_.restart_window_s);
    while (!service.deaths.empty() && now - service.deaths.front() > window) {
      service.deaths.pop_front();
    }
    service.deaths.push_back(now);
    const int deaths = static_cast<int>(service.deaths.size());
    if (deaths > options_.max_restarts) {
      return absl::UnavailableError(absl::StrCat(
          service.name, " died ", deaths, " times within ", absl::FormatDuration(window),
          " (max_restarts ", options_.max_restarts, "); giving up. The last time: ",
          why.message()));
    }
    absl::Duration backoff = absl::Seconds(options_.restart_backoff_s);
    for (int i = 1; i < deaths; ++i) backoff *= 2;
    backoff = std::min(backoff, absl::Seconds(options_.restart_backoff_max_s));
    service.restart_at = now + backoff;
    std::printf("\nkforge local: %s; restarting it in %s (restart %d of at most %d within %s)\n",
                said.c_str(), absl::FormatDuration(backoff).c_str(), deaths,
                options_.max_restarts, absl::FormatDuration(window).c_str());
    std::fflush(stdout);
    return absl::OkStatus();
  }

  const LocalOptions& options_;
  const LocalSecurity& security_;
  std::vector<Service>& services_;
  StopRequest& stop_;
};

// Errors a learner that is restarting gives for a while: the watcher waits.
bool LearnerAway(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsCancelled(status);
}

// Runs the job to its end (or until a signal); the exit code.
int RunJob(const LocalOptions& options, const LocalSecurity& security, const v1::JobSpec& spec,
           std::vector<Service>& services, StopRequest& stop) {
  // The watcher dials a restarted learner again as soon as kforge local
  // would restart it, not after gRPC's back-off of up to two minutes.
  ChannelSecurity to_learner = security.users();
  to_learner.set_reconnect_backoff_max(absl::Seconds(options.restart_backoff_s));
  LocalJobWatcher watcher(services.front().address(), to_learner);
  if (absl::StatusOr<std::string> id = watcher.SubmitOrResume(spec); !id.ok()) {
    std::fprintf(stderr, "kforge local: %s\n", std::string(id.status().message()).c_str());
    StopAll(services, options);
    return kExitRuntimeError;
  }
  Supervisor supervisor(options, security, services, stop);
  // Since when the learner has not answered; a learner that died is seen by
  // the supervisor's next look, one stopping or loading takes a while.
  absl::Time away_since = absl::InfiniteFuture();
  for (;;) {
    absl::Status children = stop.Wait(absl::Milliseconds(500)) ? absl::CancelledError("stopping")
                                                               : supervisor.Tend();
    if (stop.signal().has_value()) {
      std::printf("\nkforge local: stopping (%s); %s resumes from its checkpoint at the next "
                  "`kforge local --run_dir %s`\n",
                  strsignal(*stop.signal()), watcher.job().id().c_str(), options.run_dir.c_str());
      StopAll(services, options);
      return kExitOk;
    }
    absl::StatusOr<bool> ended = children.ok() ? watcher.Poll() : children;
    if (children.ok() && !ended.ok() && LearnerAway(ended.status())) {
      const absl::Time now = absl::Now();
      away_since = std::min(away_since, now);
      // The job waits while the learner is down, restarting, or silent for
      // less than a start-up's time.
      if (supervisor.AnyDown() || now - away_since < absl::Seconds(options.start_timeout_s)) {
        continue;
      }
    } else {
      away_since = absl::InfiniteFuture();
    }
    if (!ended.ok()) {
      std::fprintf(stderr, "\nkforge local: %s\n", std::string(ended.status().message()).c_str());
      StopAll(services, options);
      return kExitRuntimeError;
    }
    if (*ended) {
      watcher.FinishLog(absl::Seconds(options.stop_grace_s));
      watcher.PrintSummary();
      StopAll(services, options);
      return watcher.job().state() == v1::JOB_SUCCEEDED ? kExitOk : kExitRuntimeError;
    }
  }
}

// Serves until a signal, restarting children that die.
int Serve(const LocalOptions& options, const LocalSecurity& security,
          std::vector<Service>& services, StopRequest& stop) {
  Supervisor supervisor(options, security, services, stop);
  for (;;) {
    absl::Status children = stop.Wait(absl::Milliseconds(500)) ? absl::CancelledError("stopping")
                                                               : supervisor.Tend();
    if (stop.signal().has_value()) {
      std::printf("\nkforge local: stopping (%s)\n", strsignal(*stop.signal()));
      StopAll(services, options);
      return kExitOk;
    }
    if (!children.ok()) {
      std::fprintf(stderr, "kforge local: %s\n", std::string(children.message()).c_str());
      StopAll(services, options);
      return kExitRuntimeError;
    }
  }
}

}  // namespace

int RunLocal(const LocalOptions& options) {
  // The bound of VerifierWorkerConfig.spare_sandboxes, which it also sets.
  if (options.verifier_slots < 0 || options.verifier_slots > 256) {
    std::fprintf(stderr, "kforge local: --verifier_slots must be 0 (automatic) or 1..256, not %d\n",
                 options.verifier_slots);
    return kExitConfigError;
  }
  if (!(options.stop_grace_s >= 0) || !std::isfinite(options.stop_grace_s)) {
    std::fprintf(stderr, "kforge local: --stop_grace_s must be a number of seconds >= 0, not %g\n",
                 options.stop_grace_s);
    return kExitConfigError;
  }
  if (!options.rollout_config.empty()) {
    v1::RolloutWorkerConfig rollout;
    if (absl::Status loaded =
            LoadConfigFile(options.rollout_config, &rollout, "rollout_worker_config");
        !loaded.ok()) {
      std::fprintf(stderr, "kforge local: --rollout_config %s: %s\n",
                   options.rollout_config.c_str(), std::string(loaded.message()).c_str());
      return kExitConfigError;
    }
  }
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
  // Where each kind runs, as RolloutDevice and VerifierDevice place them.
  const std::string where =
      gpus < 2 ? absl::StrCat("all on ", device)
               : absl::StrCat("learner on ", device, ", rollout on cuda:1",
                              gpus > 2 && options.rollout_workers > 1
                                  ? absl::StrCat("..", std::min(gpus - 1, options.rollout_workers))
                                  : "",
                              ", verifiers on cuda:0..", std::min(gpus, VerifierCount(options, gpus)) - 1);
  const int verifiers = VerifierCount(options, gpus);
  std::printf("kforge local: starting learner, %d verifier(s) checking %d candidates at once each, "
              "%d rollout worker(s) (%s; %d GPU(s)) in %s\n",
              verifiers, VerifierSlots(options, verifiers), options.rollout_workers, where.c_str(),
              gpus, options.run_dir.c_str());
  std::printf("kforge local: %s\n", security->Describe().c_str());
  std::fflush(stdout);
  // Rollout workers build their model from the job's checkpoint: the
  // learner's weights reach them by snapshot or broadcast, which fit only
  // the architecture they were made for.
  const std::string rollout_model = spec->model_path().empty() ? *model : spec->model_path();
  StopRequest stop;
  if (absl::Status started =
          StartAll(options, *security, rollout_model, device, gpus, services, stop);
      !started.ok()) {
    StopAll(services, options);
    if (stop.signal().has_value()) {
      std::printf("\nkforge local: stopped while starting (%s)\n", strsignal(*stop.signal()));
      return kExitOk;
    }
    std::fprintf(stderr, "kforge local: %s\n", std::string(started.message()).c_str());
    return kExitRuntimeError;
  }
  PrintTable(services, options.serve, *security);
  return options.serve ? Serve(options, *security, services, stop)
                       : RunJob(options, *security, *spec, services, stop);
}

}  // namespace kforge
