// SIGTERM / SIGINT handling without async-signal-unsafe handlers: the
// signals are blocked in every thread (call BlockTerminationSignals() first
// thing in main, before any thread starts, so all threads inherit the mask)
// and the main thread receives them synchronously.
//
//   int main() {
//     kforge::BlockTerminationSignals();
//     ...start servers...
//     int sig = kforge::WaitForTerminationSignal();
//     ...drain...
//   }
#ifndef KFORGE_COMMON_SERVER_TERMINATION_SIGNALS_H_
#define KFORGE_COMMON_SERVER_TERMINATION_SIGNALS_H_

#include <optional>

#include "absl/time/time.h"

namespace kforge {

void BlockTerminationSignals();

// Blocks until SIGTERM or SIGINT arrives; returns the signal number.
int WaitForTerminationSignal();

// As above but gives up after `timeout` and returns nullopt.
std::optional<int> WaitForTerminationSignalFor(absl::Duration timeout);

// Restores the default mask (used in a forked child before exec).
void UnblockAllSignals();

}  // namespace kforge

#endif  // KFORGE_COMMON_SERVER_TERMINATION_SIGNALS_H_
