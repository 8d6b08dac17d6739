// `kforge local`: the whole mesh on one machine. Starts a learner, verifier
// workers and rollout workers as child processes on loopback, waits until
// each reports SERVING, prints their addresses, and stops them cleanly on
// Ctrl-C (SIGINT) or SIGTERM. A child that dies stops the rest and the
// command exits non-zero, naming it and showing the end of its log.
#ifndef KFORGE_CLI_LOCAL_COMMAND_H_
#define KFORGE_CLI_LOCAL_COMMAND_H_

#include <string>

namespace kforge {

struct LocalOptions {
  std::string run_dir = "kforge-local";
  int learner_port = 50051;  // 0: a free port
  int verifiers = 1;
  int rollout_workers = 1;
  std::string python;  // verifier interpreter; empty: found automatically
  // Checkpoint the rollout workers sample with; empty: <run_dir>/tiny-model,
  // written by `kforge tiny-model` the first time.
  std::string model;
  double start_timeout_s = 120;
};

int RunLocal(const LocalOptions& options);

}  // namespace kforge

#endif  // KFORGE_CLI_LOCAL_COMMAND_H_
