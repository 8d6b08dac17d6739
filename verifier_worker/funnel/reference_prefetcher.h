// Reference epochs made ahead, in the background, for the batch a task's
// candidates will name next (VerifyRequest.next_batch_id): one make at a
// time on one named thread, each key (a task's scope and batch) queued once,
// at most `max_queued` queued or running; the rest are refused, and that
// batch's first candidate makes its epoch as it would without a prefetch.
// The destructor drops what has not started and waits for the make running.
//
//   ReferencePrefetcher prefetcher(/*max_queued=*/16);
//   prefetcher.Enqueue(key, [&] { cache.Prefetch(scope, next_batch, make); });
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_PREFETCHER_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_PREFETCHER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/server/work_pool.h"

namespace kforge {

class ReferencePrefetcher {
 public:
  enum class Queued {
    kQueued,
    kDuplicate,  // the key is queued or running already
    kFull,       // max_queued keys are queued or running
    kOff,        // max_queued 0: no thread, nothing queued
  };

  explicit ReferencePrefetcher(int max_queued);
  ReferencePrefetcher(const ReferencePrefetcher&) = delete;
  ReferencePrefetcher& operator=(const ReferencePrefetcher&) = delete;
  ~ReferencePrefetcher();

  // Queues `work` under `key`; never waits.
  Queued Enqueue(const std::string& key, std::function<void()> work);
  // Keys queued or running now.
  int pending() const;

 private:
  const int max_queued_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<std::string> keys_ ABSL_GUARDED_BY(mu_);  // queued or running
  std::atomic<bool> stopping_{false};
  std::unique_ptr<WorkPool> pool_;  // null when off; its thread uses the fields above
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_PREFETCHER_H_
