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

  // Sends `request` (with its attached buffers) and returns the reply; a
  // reply written into the buffer the request offered comes back with that
  // buffer sealed as its payload. INTERNAL with the server's message when
  // the request failed there.
  absl::StatusOr<Frame> Call(const Frame& request, absl::Duration timeout);

  // The server held for a sequence of calls, no other caller's in between.
  // Whoever also holds the GPU takes the server first: holding the GPU
  // alone while waiting for a server busy with another task (a
  // torch.compile build, a transfer of gigabytes) stalls every candidate.
  //   ReferenceClient::Held server(client);
  //   KF_ASSIGN_OR_RETURN(Frame reply, server.Call(request, timeout));
  class Held {
   public:
    explicit Held(ReferenceClient& client) : client_(client) { client_.mu_.Lock(); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ~Held() { client_.mu_.Unlock(); }
    absl::StatusOr<Frame> Call(const Frame& request, absl::Duration timeout) {
      return client_.CallHeld(request, timeout);
    }

   private:
    ReferenceClient& client_;
  };

 private:
  absl::StatusOr<Frame> CallHeld(const Frame& request, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const HarnessSetup setup_;
  absl::Mutex mu_;
  std::optional<HarnessProcess> process_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_SANDBOX_REFERENCE_CLIENT_H_
