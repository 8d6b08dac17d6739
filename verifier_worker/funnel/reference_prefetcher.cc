#include "verifier_worker/funnel/reference_prefetcher.h"

#include <algorithm>
#include <utility>

namespace kforge {

ReferencePrefetcher::ReferencePrefetcher(int max_queued) : max_queued_(std::max(0, max_queued)) {
  if (max_queued_ > 0) pool_ = std::make_unique<WorkPool>("kf-ref-ahead", 1, max_queued_);
}

ReferencePrefetcher::~ReferencePrefetcher() {
  // What has not started is dropped (each closure sees the flag); the pool's
  // destructor waits for the one running and joins its thread.
  stopping_ = true;
  pool_.reset();
}

ReferencePrefetcher::Queued ReferencePrefetcher::Enqueue(const std::string& key,
                                                         std::function<void()> work) {
  if (pool_ == nullptr) return Queued::kOff;
  absl::MutexLock lock(&mu_);
  if (keys_.contains(key)) return Queued::kDuplicate;
  // Fewer than max_queued keys outstanding: the pool's queue has room, so
  // Submit does not wait.
  if (static_cast<int>(keys_.size()) >= max_queued_) return Queued::kFull;
  keys_.insert(key);
  pool_->Submit([this, key, work = std::move(work)] {
    if (!stopping_) work();
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
