// Several trusted reference servers, each task served by one of them (by a
// hash of its key), so one task's reference epoch or torch.compile
// baseline, seconds of work, does not hold up every other task's. A task
// always goes to the same server, which keeps its model, compiled model
// and timing inputs loaded.
//
//   ReferencePool pool(setup, /*servers=*/2);
//   KF_ASSIGN_OR_RETURN(Frame reply, pool.For(task_key).Call(request, timeout));
#ifndef KFORGE_VERIFIER_WORKER_SANDBOX_REFERENCE_POOL_H_
#define KFORGE_VERIFIER_WORKER_SANDBOX_REFERENCE_POOL_H_

#include <memory>
#include <string>
#include <vector>

#include "verifier_worker/sandbox/reference_client.h"

namespace kforge {

class ReferencePool {
 public:
  // `servers` below 1 counts as 1. Each server logs to its own folder under
  // setup.log_dir ("reference-0", ...) and starts on its first call.
  ReferencePool(const HarnessSetup& setup, int servers);

  ReferenceClient& For(const std::string& task_key);
  ReferenceClient& First() { return *clients_.front(); }
  int size() const { return static_cast<int>(clients_.size()); }

 private:
  std::vector<std::unique_ptr<ReferenceClient>> clients_;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_SANDBOX_REFERENCE_POOL_H_
