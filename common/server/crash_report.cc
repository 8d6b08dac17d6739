#include "common/server/crash_report.h"

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"

namespace kforge {

void InstallCrashReport(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  absl::FailureSignalHandlerOptions options;
  // Re-raise after the report so exit statuses (and core dumps where
  // enabled) stay what they would have been.
  options.call_previous_handler = true;
  absl::InstallFailureSignalHandler(options);
}

}  // namespace kforge
