// kforge: the command line. `kforge help` lists the commands.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "cli/eval_command.h"
#include "cli/job_commands.h"
#include "cli/local_command.h"
#include "cli/tiny_model_command.h"
#include "cli/verify_command.h"
#include "common/security/channel_security.h"
#include "common/server/crash_report.h"
#include "common/server/process_main.h"
#include "common/server/termination_signals.h"

ABSL_FLAG(std::string, server, "",
          "job commands: learner address (default localhost:50051); verify: a remote verifier "
          "(default: verify in process)");
ABSL_FLAG(double, deadline_s, 30, "deadline of each unary call, seconds");
ABSL_FLAG(bool, json, false, "print protobuf JSON instead of tables");
ABSL_FLAG(std::string, run_dir, "kforge-local", "kforge local: folder for logs and state");
ABSL_FLAG(int, learner_port, 50051, "kforge local: learner gRPC port (0: a free port)");
ABSL_FLAG(int, verifiers, 0,
          "kforge local: number of verifier workers (0: one per GPU, each on its own; one on "
          "the CPU)");
ABSL_FLAG(int, rollout_workers, 1, "kforge local: number of rollout workers");
ABSL_FLAG(std::string, rollout_config, "",
          "kforge local: a RolloutWorkerConfig JSON file each rollout worker starts from "
          "(e.g. {\"verifier_affinity_slack\": 8}); placement flags still override it");
ABSL_FLAG(std::string, job, "",
          "kforge local: a JobSpec as JSON to run instead of the built-in default job");
ABSL_FLAG(bool, short, false,
          "kforge local: the default job with 10 GRPO steps instead of 100, as CI runs it");
ABSL_FLAG(bool, serve, false,
          "kforge local: submit no job; serve until Ctrl-C (for grpcurl / kforge submit)");
ABSL_FLAG(std::string, python, "", "kforge local / verify: the verifier's Python interpreter");
ABSL_FLAG(std::string, model, "",
          "kforge local: checkpoint folder the rollout workers sample with (default: the "
          "built-in tiny model in RUN_DIR/tiny-model); kforge eval: the model to evaluate");
ABSL_FLAG(std::string, task, "", "kforge verify: the task (a KernelBench-style reference module)");
ABSL_FLAG(std::string, candidate, "", "kforge verify: the candidate (code or a raw completion)");
ABSL_FLAG(std::string, options, "", "kforge verify: VerifierOptions as JSON");
ABSL_FLAG(std::string, device, "cpu", "kforge verify: cpu or cuda:N (in-process verifier)");
ABSL_FLAG(bool, require_triton, true,
          "kforge verify: require @triton.jit kernels (turn off for CPU-only candidates)");
ABSL_FLAG(std::string, candidates, "", "kforge eval: folder of candidate files (see help)");
ABSL_FLAG(std::string, tasks, "",
          "kforge eval: task folder in the KernelBench layout (default: KernelBench's problems: "
          "$KFORGE_KERNELBENCH_DIR, third_party/kernelbench/KernelBench, ../shared/kernelbench)");
ABSL_FLAG(std::vector<std::string>, levels, {}, "kforge eval: levels to evaluate, e.g. 1,2");
ABSL_FLAG(std::string, out, "", "kforge eval: folder for report.json, report.md and plots");
ABSL_FLAG(int, concurrency, 2, "kforge eval: candidates verified at once in process");
ABSL_FLAG(int, samples, 1, "kforge eval: completions per task with --model (1: greedy)");
ABSL_FLAG(int, turns, 1,
          "kforge eval: turns per sample with --model (1..8): later turns read the verifier's "
          "feedback on the last answer, as in a multi-turn job; the report adds a table by turn");
ABSL_FLAG(double, temperature, 0.8, "kforge eval: sampling temperature when --samples > 1");
ABSL_FLAG(int, max_new_tokens, 1024, "kforge eval: tokens per completion at most");
ABSL_FLAG(std::string, arch, "qwen2", "kforge tiny-model: qwen2, qwen3 or llama");
ABSL_FLAG(uint64_t, seed, 0,
          "kforge tiny-model: seed of the random weights; kforge local: seed of the run (the "
          "tiny model it writes, and the default job's seed and sampling.seed)");
ABSL_FLAG(std::string, dtype, "float32", "kforge tiny-model: float32 or bfloat16");
ABSL_FLAG(std::string, token_file, "",
          "client commands: a file whose first line is the bearer token sent on every call (a "
          "user's token for the job commands, a service token for verify/eval --server); "
          "kforge local: the tokens JobService accepts");
ABSL_FLAG(std::string, ca_file, "",
          "client commands: speak TLS and verify the server against this PEM CA bundle");
ABSL_FLAG(std::string, cert_file, "",
          "client commands: PEM certificate presented to the server (mutual TLS)");
ABSL_FLAG(std::string, key_file, "", "client commands: the private key of --cert_file");
ABSL_FLAG(std::string, server_name, "",
          "client commands: the name the server's certificate must carry, when not --server's host");
ABSL_FLAG(std::string, tls_dir, "",
          "kforge local: serve TLS with DIR/local.crt, DIR/local.key and DIR/ca.crt "
          "(deploy/tls/make-certs.sh DIR local localhost 127.0.0.1), mutual TLS between services");
ABSL_FLAG(std::vector<std::string>, model_roots, {},
          "kforge local: more folders the learner may read models from");
ABSL_FLAG(std::vector<std::string>, task_roots, {},
          "kforge local: more folders the learner may read task sets from");
ABSL_FLAG(int, max_restarts, 5,
          "kforge local: a service that dies is restarted; one that dies more than this many "
          "times within --restart_window_s stops the run");
ABSL_FLAG(double, restart_window_s, 600, "kforge local: the window of --max_restarts, seconds");
ABSL_FLAG(double, restart_backoff_s, 1,
          "kforge local: wait before restarting a dead service, seconds; doubled for each "
          "earlier death in the window");
ABSL_FLAG(double, restart_backoff_max_s, 30, "kforge local: the longest restart wait, seconds");
ABSL_FLAG(int, verifier_slots, 0,
          "kforge local: candidates each verifier checks at once, and spare sandboxes it keeps, "
          "1..256 (0: half the CPU cores shared among the verifiers, 2 to 8)");
ABSL_FLAG(double, stop_grace_s, 15,
          "kforge local: on Ctrl-C, seconds each service gets to drain and exit before it is "
          "killed (the learner writes its exit checkpoint then: raise it for large models); "
          "at a job's end, the most it waits for the job's last log lines");

namespace {

constexpr const char* kUsage = R"(kforge: train language models to write fast, correct Triton kernels

usage: kforge COMMAND [flags] [args]

commands:
  local                 run learner, verifiers and rollout workers on loopback and train
                        the built-in job on the tiny model, showing progress (or --job
                        FILE.json; --short: a short default job; --serve: no job,
                        serve until Ctrl-C)
                        (--run_dir, --learner_port, --verifiers, --rollout_workers, --python,
                        --model); a service that dies is restarted (--max_restarts,
                        --restart_window_s, --restart_backoff_s)
  submit FILE.json      submit a JobSpec (JSON) to the learner (--server)
  jobs                  list jobs
  watch JOB             stream a job's progress until it ends
  cancel JOB            cancel a queued or running job
  health [SERVICE]      ask a server's grpc.health.v1 whether it is SERVING (exit 0 if so)
                        (client commands: --token_file FILE, --ca_file CA.pem for TLS,
                        --cert_file/--key_file for mutual TLS, --server_name NAME)
  verify                verify one candidate: --task TASK.py --candidate FILE
                        [--json] [--server HOST:PORT] [--device cuda:0]
                        [--require_triton=false] [--options OPTIONS.json]
  eval                  score a model or a folder of candidates: --model DIR
                        [--samples K] [--turns N] or --candidates DIR; [--tasks DIR] (default:
                        KernelBench's problems, as scripts/kernelbench-dir.sh finds them)
                        [--levels 1,2] [--server HOST:PORT] [--out DIR] [--json]
                        [--require_triton=false] [--device cuda:0]
  tiny-model OUT_DIR    write a small random Hugging Face checkpoint (and tokenizer)
                        [--arch qwen2|qwen3|llama] [--seed N] [--dtype float32|bfloat16]
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

// How the client commands reach --server, from the TLS and token flags.
absl::StatusOr<kforge::ChannelSecurity> ClientSecurity(const std::string& server) {
  kforge::v1::TlsConfig tls;
  tls.set_ca_file(absl::GetFlag(FLAGS_ca_file));
  tls.set_cert_file(absl::GetFlag(FLAGS_cert_file));
  tls.set_key_file(absl::GetFlag(FLAGS_key_file));
  tls.set_server_name(absl::GetFlag(FLAGS_server_name));
  tls.set_client_certs("none");
  tls.set_reload_interval_s(60);
  if (!tls.cert_file().empty() && tls.ca_file().empty()) {
    return absl::InvalidArgumentError("--cert_file: needs --ca_file (mutual TLS is TLS)");
  }
  if (absl::Status s = kforge::CheckTlsConfig(tls, "--tls").status(); !s.ok()) return s;
  std::vector<std::string> tokens;
  if (!absl::GetFlag(FLAGS_token_file).empty()) tokens.push_back(absl::GetFlag(FLAGS_token_file));
  absl::StatusOr<kforge::ChannelSecurity> security =
      kforge::ChannelSecurity::Create(tls, tokens, absl::Seconds(10));
  if (!security.ok()) return security.status();
  if (!server.empty()) {
    if (absl::Status s = security->CheckTarget(server, "--server"); !s.ok()) return s;
  }
  return security;
}

}  // namespace

int main(int argc, char** argv) {
  kforge::InstallCrashReport(argv[0]);
  kforge::BlockTerminationSignals();
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) return Usage(kforge::kExitConfigError);
  const std::string command = positional[1];
  const std::vector<std::string> args(positional.begin() + 2, positional.end());
  const std::string server = absl::GetFlag(FLAGS_server);
  if (command == "help") return Usage(kforge::kExitOk);
  absl::StatusOr<kforge::ChannelSecurity> security;
  if (command != "local") {
    security = ClientSecurity(server.empty() && command != "verify" && command != "eval"
                                  ? "localhost:50051" : server);
    if (!security.ok()) {
      std::fprintf(stderr, "kforge %s: %s\n", command.c_str(),
                   std::string(security.status().message()).c_str());
      return kforge::kExitConfigError;
    }
  }
  const kforge::ClientOptions client{.server = server.empty() ? "localhost:50051" : server,
                                     .deadline_s = absl::GetFlag(FLAGS_deadline_s),
                                     .json = absl::GetFlag(FLAGS_json),
                                     .security = security.ok() ? *security
                                                               : kforge::ChannelSecurity()};
  if (command == "local") {
    return kforge::RunLocal({.run_dir = absl::GetFlag(FLAGS_run_dir),
                             .learner_port = absl::GetFlag(FLAGS_learner_port),
                             .verifiers = absl::GetFlag(FLAGS_verifiers),
                             .rollout_workers = absl::GetFlag(FLAGS_rollout_workers),
                             .python = absl::GetFlag(FLAGS_python),
                             .model = absl::GetFlag(FLAGS_model),
                             .job_file = absl::GetFlag(FLAGS_job),
                             .short_job = absl::GetFlag(FLAGS_short),
                             .seed = absl::GetFlag(FLAGS_seed),
                             .serve = absl::GetFlag(FLAGS_serve),
                             .tls_dir = absl::GetFlag(FLAGS_tls_dir),
                             .token_file = absl::GetFlag(FLAGS_token_file),
                             .model_roots = absl::GetFlag(FLAGS_model_roots),
                             .task_roots = absl::GetFlag(FLAGS_task_roots),
                             .max_restarts = absl::GetFlag(FLAGS_max_restarts),
                             .restart_window_s = absl::GetFlag(FLAGS_restart_window_s),
                             .restart_backoff_s = absl::GetFlag(FLAGS_restart_backoff_s),
                             .restart_backoff_max_s = absl::GetFlag(FLAGS_restart_backoff_max_s),
                             .stop_grace_s = absl::GetFlag(FLAGS_stop_grace_s),
                             .verifier_slots = absl::GetFlag(FLAGS_verifier_slots),
                             .rollout_config = absl::GetFlag(FLAGS_rollout_config)});
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
  if (command == "health") return kforge::CheckHealth(client, args.empty() ? "" : args[0]);
  if (command == "verify") {
    return kforge::RunVerify({.task_file = absl::GetFlag(FLAGS_task),
                              .candidate_file = absl::GetFlag(FLAGS_candidate),
                              // In process unless --server is given.
                              .server = absl::GetFlag(FLAGS_server),
                              .security = client.security,
                              .options_file = absl::GetFlag(FLAGS_options),
                              .python = absl::GetFlag(FLAGS_python),
                              .device = absl::GetFlag(FLAGS_device),
                              .require_triton = absl::GetFlag(FLAGS_require_triton),
                              .json = absl::GetFlag(FLAGS_json)});
  }
  if (command == "eval") {
    std::vector<int> levels;
    for (const std::string& level : absl::GetFlag(FLAGS_levels)) {
      int value = 0;
      if (!absl::SimpleAtoi(level, &value)) {
        std::fprintf(stderr, "kforge eval: --levels: \"%s\" is not a number\n", level.c_str());
        return kforge::kExitConfigError;
      }
      levels.push_back(value);
    }
    return kforge::RunEval({.candidates_dir = absl::GetFlag(FLAGS_candidates),
                            .model_dir = absl::GetFlag(FLAGS_model),
                            .samples = absl::GetFlag(FLAGS_samples),
                            .turns = absl::GetFlag(FLAGS_turns),
                            .temperature = absl::GetFlag(FLAGS_temperature),
                            .max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens),
                            .tasks_dir = absl::GetFlag(FLAGS_tasks),
                            .levels = levels,
                            .server = absl::GetFlag(FLAGS_server),
                            .security = client.security,
                            .out_dir = absl::GetFlag(FLAGS_out),
                            .python = absl::GetFlag(FLAGS_python),
                            .device = absl::GetFlag(FLAGS_device),
                            .require_triton = absl::GetFlag(FLAGS_require_triton),
                            .concurrency = absl::GetFlag(FLAGS_concurrency),
                            .json = absl::GetFlag(FLAGS_json)});
  }
  if (command == "tiny-model") {
    return kforge::RunTinyModel({.out_dir = args.empty() ? "" : args[0],
                                 .arch = absl::GetFlag(FLAGS_arch),
                                 .seed = absl::GetFlag(FLAGS_seed),
                                 .dtype = absl::GetFlag(FLAGS_dtype)});
  }
  std::fprintf(stderr, "kforge: unknown command \"%s\"\n\n", command.c_str());
  return Usage(kforge::kExitConfigError);
}
