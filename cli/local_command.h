// `kforge local`: the whole mesh on one machine. Starts a learner, verifier
// workers and rollout workers as child processes on loopback, waits until
// each reports SERVING and prints their addresses; then submits the default
// job (local_job.h; --short its short version, --job FILE, or picks up the
// job an earlier run left unfinished), shows its progress until it ends,
// prints a summary and stops everything. --serve submits nothing and serves
// until Ctrl-C, for jobs submitted with grpcurl or `kforge submit`. Ctrl-C
// (SIGINT) or SIGTERM stops the services cleanly: the learner checkpoints the
// running job, which the next `kforge local` resumes. A child that dies (any
// signal, any exit) is restarted on its port after a back-off and the job
// goes on (a restarted learner resumes it from its last checkpoint); one
// that dies more than --max_restarts times within --restart_window_s stops
// the rest, and the command exits non-zero naming it and showing the end of
// its log. The services die with kforge local, even when it is killed -9.
//
// The run folder is locked for the command's life (a second `kforge local`
// on it refuses to start, naming the first). The mesh speaks plaintext on
// loopback unless --tls_dir is given (local_security.h), and says which at
// start-up. The learner reads models under the run folder (and --model's
// folder) and tasks under the built-in tasks folder, plus --model_roots and
// --task_roots.
#ifndef KFORGE_CLI_LOCAL_COMMAND_H_
#define KFORGE_CLI_LOCAL_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kforge {

struct LocalOptions {
  std::string run_dir = "kforge-local";
  int learner_port = 50051;  // 0: a free port
  // Verifier workers; 0: one per GPU (each on its own GPU), one on the CPU.
  int verifiers = 0;
  int rollout_workers = 1;
  std::string python;  // verifier interpreter; empty: found automatically
  // Checkpoint the rollout workers sample with; empty: <run_dir>/tiny-model,
  // written by `kforge tiny-model` the first time.
  std::string model;
  double start_timeout_s = 120;
  // A JobSpec as JSON to run instead of the default job.
  std::string job_file;
  // The short version of the default job (ShortLocalJob); not with job_file.
  bool short_job = false;
  // Seed of the run: the tiny model's weights (when this run writes it) and
  // the default (or short) job's JobSpec.seed and sampling.seed; a job file
  // keeps its own seeds.
  uint64_t seed = 0;
  // Serve without submitting a job, until Ctrl-C.
  bool serve = false;
  // TLS certificates (local_security.h) and the JobService token file.
  std::string tls_dir;
  std::string token_file;
  // More folders the learner may read models and tasks from.
  std::vector<std::string> model_roots;
  std::vector<std::string> task_roots;
  // Supervision: a child that dies is started again after restart_backoff_s,
  // doubled for each earlier death within restart_window_s, at most
  // restart_backoff_max_s; the (max_restarts + 1)-th death within the window
  // ends the run.
  int max_restarts = 5;
  double restart_window_s = 600;
  double restart_backoff_s = 1;
  double restart_backoff_max_s = 30;
  // On Ctrl-C (or SIGTERM), how long each service gets to drain and exit
  // before it is killed. The learner writes its exit checkpoint meanwhile:
  // seconds for the tiny model, minutes for a 1.5B policy with its
  // optimiser state (about 21 GB). At a job's end, also the most the
  // summary waits for the job's last log lines (normally milliseconds).
  double stop_grace_s = 15;
  // Candidates each verifier checks at once (its max_concurrent, and as
  // many spare sandboxes kept ready); 0: half the CPU cores this process may
  // use shared among the verifiers, at least 2 and at most 8. A verifier's
  // own default of 2 suits a laptop; a GPU node's cores then sit idle while
  // a step's candidates queue for two slots.
  int verifier_slots = 0;
  // A RolloutWorkerConfig as JSON (proto/kforge/v1/service_config.proto)
  // every rollout worker starts from (its --config), checked before anything
  // starts; what kforge local places (learner, verifiers, model, name,
  // device, TLS) still overrides it. Empty: the defaults.
  std::string rollout_config;
};

int RunLocal(const LocalOptions& options);

}  // namespace kforge

#endif  // KFORGE_CLI_LOCAL_COMMAND_H_
