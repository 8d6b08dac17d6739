#include "verifier_worker/funnel/reference_prefetcher.h"

#include <algorithm>
#include <utility>

namespace kforge {

ReferencePrefetcher::ReferencePrefetcher(int max_queued) : max_queued_(std::max(0, max_queued)) {
  if (max_queued_ > 0) pool_ = std::make_unique<WorkPool>("kf-ref-ahead", 1, max_queued_);
}

ReferencePrefetcher::Busy::Busy(ReferencePrefetcher& prefetcher) : prefetcher_(prefetcher) {
  absl::MutexLock lock(&prefetcher_.mu_);
  ++prefetcher_.busy_;
}

ReferencePrefetcher::Busy::~Busy() {
  absl::MutexLock lock(&prefetcher_.mu_);
  --prefetcher_.busy_;
}

ReferencePrefetcher::~ReferencePrefetcher() {
  // What has not started is dropped (each closure sees the flag, also one
  // waiting for the candidates to end); the pool's destructor waits for the
  // one running and joins its thread.
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  pool_.reset();
}

ReferencePrefetcher::Queued ReferencePrefetcher::Enqueue(const std::string& key,
                                                         std::function<void(absl::Duration)> work) {
  if (pool_ == nullptr) return Queued::kOff;
  absl::MutexLock lock(&mu_);
  if (keys_.contains(key)) return Queued::kDuplicate;
  // Fewer than max_queued keys outstanding: the pool's queue has room, so
  // Submit does not wait.
  if (static_cast<int>(keys_.size()) >= max_queued_) return Queued::kFull;
  keys_.insert(key);
  pool_->Submit([this, key, work = std::move(work)] {
    const absl::Time asked = absl::Now();
    bool run = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ReferencePrefetcher* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->busy_ == 0 || p->stopping_;
          },
          this));
      run = !stopping_;
    }
    if (run) work(absl::Now() - asked);
    absl::MutexLock done(&mu_);
    keys_.erase(key);
  });
  return Queued::kQueued;
}

int ReferencePrefetcher::pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(keys_.size());
}

}  // namespace kforge
