// The verifier's handle on its trusted reference server
// (harness/kforge_harness/reference_server.py): input sets, reference
// outputs and baseline timings. One request at a time; a server that dies
// or overruns a deadline is killed and restarted on the next call.
#ifndef KFORGE_VERIFIER_WORKER_SANDBOX_REFERENCE_CLIENT_H_
#define KFORGE_VERIFIER_WORKER_SANDBOX_REFERENCE_CLIENT_H_

#include <memory>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "verifier_worker/sandbox/harness_process.h"

namespace kforge {

class ReferenceClient {
 public:
  explicit ReferenceClient(HarnessSetup setup) : setup_(std::move(setup)) {}

  // Sends `request` and returns the reply; INTERNAL with the server's
  // message when the request failed there.
  absl::StatusOr<Frame> Call(const Frame& request, absl::Duration timeout);

 private:
  const HarnessSetup setup_;
  absl::Mutex mu_;
  std::optional<HarnessProcess> process_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_SANDBOX_REFERENCE_CLIENT_H_
