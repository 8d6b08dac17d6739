// Verdicts by (task, normalised candidate source, options, device), so a
// resubmitted duplicate costs a lookup. Least recently used entries go
// first. Thread-safe.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_VERDICT_CACHE_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_VERDICT_CACHE_H_

#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "kforge/v1/verdict.pb.h"

namespace kforge {

class VerdictCache {
 public:
  explicit VerdictCache(size_t capacity) : capacity_(capacity) {}

  std::optional<kforge::v1::Verdict> Get(const std::string& key) {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  // Whether `key` timed out before; records that it has now. A timeout may
  // be the verifier's load, so the first is not cached; a second one is the
  // candidate's own (a real hang would otherwise cost its whole time limit
  // for every duplicate). Forgets everything past `capacity` keys.
  bool TimedOutBefore(const std::string& key) {
    absl::MutexLock lock(&mu_);
    if (timed_out_.contains(key)) return true;
    if (timed_out_.size() >= capacity_) timed_out_.clear();
    timed_out_.insert(key);
    return false;
  }

  void Put(const std::string& key, const kforge::v1::Verdict& verdict) {
    if (capacity_ == 0) return;
    absl::MutexLock lock(&mu_);
    if (auto it = index_.find(key); it != index_.end()) order_.erase(it->second);
    order_.emplace_front(key, verdict);
    index_[key] = order_.begin();
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

 private:
  const size_t capacity_;
  absl::Mutex mu_;
  std::list<std::pair<std::string, kforge::v1::Verdict>> order_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::list<std::pair<std::string, kforge::v1::Verdict>>::iterator>
      index_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> timed_out_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_VERDICT_CACHE_H_
