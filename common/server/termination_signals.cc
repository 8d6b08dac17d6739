#include "common/server/termination_signals.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <ctime>

namespace kforge {
namespace {

sigset_t TerminationSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // A peer hanging up must not kill the process; writes report EPIPE.
  signal(SIGPIPE, SIG_IGN);
}

int WaitForTerminationSignal() {
  sigset_t set = TerminationSet();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

std::optional<int> WaitForTerminationSignalFor(absl::Duration timeout) {
  sigset_t set = TerminationSet();
  const timespec ts = absl::ToTimespec(timeout);
  for (;;) {
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return sig;
    if (errno == EAGAIN) return std::nullopt;
    // EINTR: some other signal; wait again (the budget restarts, which only
    // lengthens a poll interval).
  }
}

void UnblockAllSignals() {
  sigset_t set;
  sigemptyset(&set);
  pthread_sigmask(SIG_SETMASK, &set, nullptr);
  signal(SIGPIPE, SIG_DFL);
}

}  // namespace kforge
