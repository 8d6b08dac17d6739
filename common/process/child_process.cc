#include "common/process/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/server/termination_signals.h"

extern char** environ;

namespace kforge {
namespace {

// Exit code of a die_with_parent child whose parent died before it could
// ask to die with it (it never runs the program).
constexpr int kExitParentGone = 125;

// In the child, before exec: closes every descriptor from `first` up. What
// the parent holds without close-on-exec (a library's, the test runner's,
// the /dev/null opened for stdin) is not the program's to keep; the
// verifier's zygote would hand it on to every candidate it forks.
// Async-signal-safe: close_range where the kernel has it (5.9), else a loop.
void CloseDescriptorsFrom(int first) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, 0U) == 0) return;
#endif
  rlimit limit{};
  const long top = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                       ? static_cast<long>(limit.rlim_cur)
                       : 65536;
  for (long fd = first; fd < top; ++fd) ::close(static_cast<int>(fd));
}

ExitInfo FromWaitStatus(int status) {
  ExitInfo info;
  if (WIFEXITED(status)) {
    info.exited = true;
    info.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    info.signal = WTERMSIG(status);
  }
  return info;
}

// Everything the child needs is prepared before fork: after fork in a
// multi-threaded parent only async-signal-safe calls are allowed.
struct PreparedExec {
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
};

bool Passes(const std::string& key, const std::optional<std::vector<std::string>>& names) {
  if (!names.has_value()) return true;
  for (const std::string& name : *names) {
    if (!name.empty() && name.back() == '*' ? absl::StartsWith(key, name.substr(0, name.size() - 1))
                                            : key == name) {
      return true;
    }
  }
  return false;
}

PreparedExec Prepare(SpawnOptions& options) {
  PreparedExec prepared;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const std::string key = entry.substr(0, entry.find('='));
    if (!options.env.contains(key) && Passes(key, options.pass_env)) {
      prepared.env_storage.push_back(std::move(entry));
    }
  }
  for (const auto& [key, value] : options.env) {
    prepared.env_storage.push_back(absl::StrCat(key, "=", value));
  }
  for (std::string& arg : options.argv) prepared.argv.push_back(arg.data());
  prepared.argv.push_back(nullptr);
  for (std::string& entry : prepared.env_storage) prepared.envp.push_back(entry.data());
  prepared.envp.push_back(nullptr);
  return prepared;
}

}  // namespace

std::string ExitInfo::Describe() const {
  if (exited) return absl::StrCat("exit code ", code);
  return absl::StrCat("killed by signal ", signal, " (", strsignal(signal), ")");
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(SpawnOptions options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("spawn: empty argv");
  UniqueFd out_read, out_write;
  if (options.capture_output) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
    }
    out_read.Reset(fds[0]);
    out_write.Reset(fds[1]);
  } else if (!options.log_file.empty()) {
    out_write.Reset(::open(options.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                           0644));
    if (!out_write) {
      return absl::PermissionDeniedError(
          absl::StrCat(options.log_file, ": cannot open log: ", std::strerror(errno)));
    }
  }
  PreparedExec prepared = Prepare(options);
  const char* working_dir = options.working_dir.empty() ? nullptr : options.working_dir.c_str();
  // Copied before fork: the child may not allocate.
  std::vector<int> inherit_copy = options.inherit_fds;
  inherit_copy.reserve(inherit_copy.size());
  std::vector<int>* inherit_fds = &inherit_copy;

  const bool die_with_parent = options.die_with_parent;
  const pid_t parent = ::getpid();
  // The kernel ties the parent-death signal to the spawning thread, not the
  // process: from any thread but main, the child would die with the thread.
  if (die_with_parent && ::gettid() != parent) {
    return absl::FailedPreconditionError(
        "die_with_parent: spawn from the main thread (the child would die with this thread)");
  }
  const pid_t pid = ::fork();
  if (pid < 0) return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::setpgid(0, 0);
    if (die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(kExitParentGone);
    }
    UnblockAllSignals();
    if (out_write) {
      ::dup2(out_write.get(), STDOUT_FILENO);
      ::dup2(out_write.get(), STDERR_FILENO);
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    // Move inherited descriptors out of the way first, so that placing
    // them at 3, 4, ... cannot clobber one not yet placed.
    std::vector<int>& inherit = *inherit_fds;
    for (int& fd : inherit) fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 100);
    for (size_t i = 0; i < inherit.size(); ++i) {
      ::dup2(inherit[i], 3 + static_cast<int>(i));  // dup2 clears close-on-exec
    }
    CloseDescriptorsFrom(3 + static_cast<int>(inherit.size()));
    if (working_dir != nullptr && ::chdir(working_dir) != 0) ::_exit(126);
    ::execvpe(prepared.argv[0], prepared.argv.data(), prepared.envp.data());
    // exec failed: report in the way a shell does.
    const char* msg = "exec failed: ";
    ssize_t ignored = ::write(STDERR_FILENO, msg, std::strlen(msg));
    ignored = ::write(STDERR_FILENO, prepared.argv[0], std::strlen(prepared.argv[0]));
    (void)ignored;
    ::_exit(127);
  }
  // Also set from the parent so the group exists before we might signal it.
  ::setpgid(pid, pid);
  return std::unique_ptr<ChildProcess>(
      new ChildProcess(pid, std::move(out_read), options.max_output_bytes));
}

ChildProcess::~ChildProcess() {
  // The group may outlive its leader (descendants); kill it either way.
  ::kill(-pid_, SIGKILL);
  if (!exit_.has_value()) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void ChildProcess::Signal(int sig) {
  if (exit_.has_value()) return;
  ::kill(-pid_, sig);
}

void ChildProcess::DrainOutput(int timeout_ms) {
  if (!output_fd_) {
    if (timeout_ms > 0) ::usleep(static_cast<useconds_t>(timeout_ms) * 1000);
    return;
  }
  pollfd pfd{output_fd_.get(), POLLIN, 0};
  if (::poll(&pfd, 1, timeout_ms) <= 0) return;
  char buffer[8192];
  const ssize_t n = ::read(output_fd_.get(), buffer, sizeof(buffer));
  if (n <= 0) {
    // EOF: every writer (the child and its descendants) closed the pipe.
    output_fd_.Reset();
    return;
  }
  const size_t room = max_output_bytes_ > output_.size() ? max_output_bytes_ - output_.size() : 0;
  output_.append(buffer, std::min(room, static_cast<size_t>(n)));
}

std::optional<ExitInfo> ChildProcess::Poll() {
  if (exit_.has_value()) return exit_;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_ = FromWaitStatus(status);
    // Collect what is left in the pipe without blocking on descendants
    // that may still hold it open.
    for (int i = 0; i < 64 && output_fd_; ++i) DrainOutput(0);
  }
  return exit_;
}

absl::StatusOr<ExitInfo> ChildProcess::WaitFor(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (std::optional<ExitInfo> info = Poll()) return *info;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "process ", pid_, " still running after ", absl::FormatDuration(timeout)));
    }
    DrainOutput(static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 20)));
  }
}

ExitInfo ChildProcess::Terminate(absl::Duration grace) {
  Signal(SIGTERM);
  absl::StatusOr<ExitInfo> info = WaitFor(grace);
  if (info.ok()) return *info;
  Signal(SIGKILL);
  info = WaitFor(absl::Seconds(10));
  return info.ok() ? *info : ExitInfo{};
}

}  // namespace kforge
