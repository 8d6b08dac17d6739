// Reference epochs made ahead, in the background, for the batch a task's
// candidates will name next (VerifyRequest.next_batch_id): one make at a
// time on one named thread, each key (a task's scope and batch) queued once,
// at most `max_queued` queued or running; the rest are refused, and that
// batch's first candidate makes its epoch as it would without a prefetch.
// The destructor drops what has not started and waits for the make running.
//
// A make starts only while no candidate is being verified (each holds a
// Busy): it is work for later, and it takes the GPU, which a timing then
// waits for, and the task's reference server. Started as soon as queued,
// 4x H100 run D's makes ahead for the next batch (3-28 s each under load)
// ran through the first GRPO step's whole verification, on every verifier.
// A candidate that comes while a make runs waits for at most that one.
//
//   ReferencePrefetcher prefetcher(/*max_queued=*/16);
//   { ReferencePrefetcher::Busy busy(prefetcher); Verify(...); }
//   prefetcher.Enqueue(key, [&](absl::Duration waited_for_idle) {
//     cache.Prefetch(scope, next_batch, make); });
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_PREFETCHER_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_PREFETCHER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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

  // A candidate being verified: no make starts while one is.
  class Busy {
   public:
    explicit Busy(ReferencePrefetcher& prefetcher);
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;
    ~Busy();

   private:
    ReferencePrefetcher& prefetcher_;
  };

  explicit ReferencePrefetcher(int max_queued);
  ReferencePrefetcher(const ReferencePrefetcher&) = delete;
  ReferencePrefetcher& operator=(const ReferencePrefetcher&) = delete;
  ~ReferencePrefetcher();

  // Queues `work` under `key`; never waits. `work` gets how long it waited,
  // once its turn came, for the candidates in flight to end.
  Queued Enqueue(const std::string& key, std::function<void(absl::Duration)> work);
  // Keys queued or running now.
  int pending() const;

 private:
  const int max_queued_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<std::string> keys_ ABSL_GUARDED_BY(mu_);  // queued or running
  int busy_ ABSL_GUARDED_BY(mu_) = 0;                            // candidates in flight
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<WorkPool> pool_;  // null when off; its thread uses the fields above
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_PREFETCHER_H_
