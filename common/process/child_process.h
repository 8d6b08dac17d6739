// A child process in its own process group, owned by this object: the
// destructor kills the whole group and reaps it, so no child outlives its
// owner by accident.
//
//   auto child = ChildProcess::Spawn({.argv = {"/usr/bin/python3", "-c", "print(1)"},
//                                     .capture_output = true});
//   absl::StatusOr<ExitInfo> exit = (*child)->WaitFor(absl::Seconds(5));
//   (*child)->output();   // "1\n"
#ifndef KFORGE_COMMON_PROCESS_CHILD_PROCESS_H_
#define KFORGE_COMMON_PROCESS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/process/unique_fd.h"

namespace kforge {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the program (searched on PATH)
  // Added to (or replacing in) the parent's environment.
  std::map<std::string, std::string> env;
  // When set, only the parent's variables named here pass to the child (a
  // name ending in '*' matches every name it begins), before `env` is
  // added: a child that runs untrusted code gets none of the parent's
  // credentials.
  std::optional<std::vector<std::string>> pass_env;
  std::string working_dir;
  // Collect stdout and stderr together (read by WaitFor); otherwise they go
  // to `log_file` if set, else to the parent's.
  bool capture_output = false;
  std::string log_file;
  // Most bytes of captured output kept; the rest is dropped.
  size_t max_output_bytes = 1 << 20;
  // Descriptors the child inherits as fd 3, 4, ... in this order (for
  // private channels to harness processes).
  std::vector<int> inherit_fds;
  // The child is killed (SIGKILL) when the thread that spawned it ends,
  // however it ends (PR_SET_PDEATHSIG): so a supervisor killed with -9
  // leaves no service behind. Only for children spawned from a thread that
  // lives as long as the process (main), since the kernel ties the signal
  // to the spawning thread.
  bool die_with_parent = false;
};

struct ExitInfo {
  bool exited = false;  // normal exit (code valid) vs. killed (signal valid)
  int code = 0;
  int signal = 0;
  std::string Describe() const;
};

class ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(SpawnOptions options);

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Kills the process group (SIGKILL) if still running, then reaps.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }

  // Sends `sig` to the whole process group.
  void Signal(int sig);

  // Waits up to `timeout` for exit, reading captured output meanwhile.
  // DEADLINE_EXCEEDED if still running (it is left running).
  absl::StatusOr<ExitInfo> WaitFor(absl::Duration timeout);

  // Non-blocking: the exit info if the child has exited.
  std::optional<ExitInfo> Poll();

  // SIGTERM, wait up to `grace`, then SIGKILL; returns how it ended.
  ExitInfo Terminate(absl::Duration grace);

 private:
  ChildProcess(pid_t pid, UniqueFd output_fd, size_t max_output_bytes)
      : pid_(pid), output_fd_(std::move(output_fd)), max_output_bytes_(max_output_bytes) {}
  void DrainOutput(int timeout_ms);

  pid_t pid_;
  UniqueFd output_fd_;
  size_t max_output_bytes_;
  std::string output_;
  std::optional<ExitInfo> exit_;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_PROCESS_CHILD_PROCESS_H_
