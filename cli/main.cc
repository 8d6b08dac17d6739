// kforge: the command line. `kforge help` lists the commands.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "cli/job_commands.h"
#include "cli/local_command.h"
#include "common/server/process_main.h"
#include "common/server/termination_signals.h"

ABSL_FLAG(std::string, server, "localhost:50051", "learner address for job commands");
ABSL_FLAG(double, deadline_s, 30, "deadline of each unary call, seconds");
ABSL_FLAG(bool, json, false, "print protobuf JSON instead of tables");
ABSL_FLAG(std::string, run_dir, "kforge-local", "kforge local: folder for logs and state");
ABSL_FLAG(int, learner_port, 50051, "kforge local: learner gRPC port (0: a free port)");
ABSL_FLAG(int, verifiers, 1, "kforge local: number of verifier workers");
ABSL_FLAG(int, rollout_workers, 1, "kforge local: number of rollout workers");
ABSL_FLAG(std::string, python, "", "kforge local: the verifiers' Python interpreter");

namespace {

constexpr const char* kUsage = R"(kforge: train language models to write fast, correct Triton kernels

usage: kforge COMMAND [flags] [args]

commands:
  local                 run learner, verifiers and rollout workers on loopback
                        (--run_dir, --learner_port, --verifiers, --rollout_workers, --python)
  submit FILE.json      submit a JobSpec (JSON) to the learner (--server)
  jobs                  list jobs
  watch JOB             stream a job's progress until it ends
  cancel JOB            cancel a queued or running job
  help                  this text; `kforge --helpfull` lists every flag
)";

int Usage(int code) {
  std::fputs(kUsage, code == 0 ? stdout : stderr);
  return code;
}

int NeedArgument(const std::string& command, const char* what) {
  std::fprintf(stderr, "kforge %s: missing %s\n", command.c_str(), what);
  return kforge::kExitConfigError;
}

}  // namespace

int main(int argc, char** argv) {
  kforge::BlockTerminationSignals();
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) return Usage(kforge::kExitConfigError);
  const std::string command = positional[1];
  const std::vector<std::string> args(positional.begin() + 2, positional.end());
  const kforge::ClientOptions client{.server = absl::GetFlag(FLAGS_server),
                                     .deadline_s = absl::GetFlag(FLAGS_deadline_s),
                                     .json = absl::GetFlag(FLAGS_json)};
  if (command == "help") return Usage(kforge::kExitOk);
  if (command == "local") {
    return kforge::RunLocal({.run_dir = absl::GetFlag(FLAGS_run_dir),
                             .learner_port = absl::GetFlag(FLAGS_learner_port),
                             .verifiers = absl::GetFlag(FLAGS_verifiers),
                             .rollout_workers = absl::GetFlag(FLAGS_rollout_workers),
                             .python = absl::GetFlag(FLAGS_python)});
  }
  if (command == "submit") {
    return args.empty() ? NeedArgument(command, "FILE.json") : kforge::SubmitJob(client, args[0]);
  }
  if (command == "jobs") return kforge::ListJobs(client);
  if (command == "watch") {
    return args.empty() ? NeedArgument(command, "JOB") : kforge::WatchJob(client, args[0]);
  }
  if (command == "cancel") {
    return args.empty() ? NeedArgument(command, "JOB") : kforge::CancelJob(client, args[0]);
  }
  std::fprintf(stderr, "kforge: unknown command \"%s\"\n\n", command.c_str());
  return Usage(kforge::kExitConfigError);
}
