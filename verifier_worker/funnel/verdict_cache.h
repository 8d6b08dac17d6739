// Verdicts by (task, normalised candidate source, options, device), so a
// resubmitted duplicate costs a lookup. Least recently used entries go
// first. Thread-safe.
//
// A verdict that may say more about the verifier's load than about the
// candidate (MayBeTheVerifiersLoad) is kept only once the candidate got
// such a verdict at two moments (FailedUnderLoadBefore): a duplicate is
// otherwise verified again, at another moment, instead of inheriting a
// failure of the busiest one.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_VERDICT_CACHE_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_VERDICT_CACHE_H_

#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kforge/v1/verdict.pb.h"

namespace kforge {

// A wall-clock limit reached (a first GRPO step brings every task's
// baseline builds and a hundred compiles at once), or a candidate whose
// outputs were right on every input set failed by a judgement of the clocks
// alone (the timing stage failed, the verdict still correct): a host clock
// far above the timing events (HACK_SIDE_STREAM), a fresh input's time far
// above the trials' (HACK_RESULT_CACHING), an implausible speedup; or one
// that passed, timed slower than eager by more than `confirm_speedup_below`
// (TimingProtocol; 0: never). A busy host inflates the host clock, and
// another process's kernels on the same GPU every clock: on two H200s,
// while a warm start trained on the verifiers' GPUs, reference solutions'
// 0.05 ms kernels took 0.6-2.5 ms so.
//
// Also a hack found at run time (a flag, no failed static stage): the
// run-time checks look at the candidate's process while the harness's own
// threads run in it, and one wrong look costs the candidate a penalty for
// every duplicate. On 2x H200 one honest SELU was refused once (the audit's
// re-entry mark, set by a warm-up thread, read as the candidate's) and that
// verdict was served 209 times. A hack confirmed at a second moment is kept.
inline bool MayBeTheVerifiersLoad(const kforge::v1::Verdict& verdict,
                                  double confirm_speedup_below) {
  if (verdict.correct() && verdict.speedup_vs_eager() > 0 &&
      verdict.speedup_vs_eager() < confirm_speedup_below) {
    return true;
  }
  bool static_failed = false;
  for (const kforge::v1::StageResult& stage : verdict.stages()) {
    static_failed |= stage.stage() == kforge::v1::STAGE_STATIC &&
                     stage.outcome() != kforge::v1::OUTCOME_PASSED;
  }
  if (verdict.hack_flags_size() > 0 && !static_failed) return true;
  for (const kforge::v1::StageResult& stage : verdict.stages()) {
    if (stage.outcome() == kforge::v1::OUTCOME_TIMED_OUT) return true;
    if (stage.stage() == kforge::v1::STAGE_TIMING &&
        stage.outcome() == kforge::v1::OUTCOME_FAILED && verdict.correct()) {
      return true;
    }
  }
  return false;
}

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

  // Whether `key` got a verdict that may be the verifier's load before, in
  // a verification that had ended when this one (`started`) began; records
  // that it has now (`now`). The first is not cached; one at another moment
  // is the candidate's own (a real hang would otherwise cost its whole time
  // limit for every duplicate). Duplicates verified at once under the same
  // load are one moment: on 2x H200 two identical candidates of a first
  // GRPO step both failed a clock check, and the second's verdict was then
  // served from the cache to the candidate's later duplicates. Forgets
  // everything past `capacity` keys.
  bool FailedUnderLoadBefore(const std::string& key, absl::Time started, absl::Time now) {
    absl::MutexLock lock(&mu_);
    auto it = failed_under_load_.find(key);
    if (it != failed_under_load_.end()) return it->second <= started;
    if (failed_under_load_.size() >= capacity_) failed_under_load_.clear();
    failed_under_load_.emplace(key, now);
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
  // The end of each key's first verdict that may be the verifier's load.
  absl::flat_hash_map<std::string, absl::Time> failed_under_load_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_VERDICT_CACHE_H_
