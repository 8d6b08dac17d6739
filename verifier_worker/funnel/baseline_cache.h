// Baseline timings shared by every candidate of a task: the eager and
// torch.compile times of the reference, measured once per (task, input
// shapes and dtypes, init inputs, device, library versions, timing
// protocol) and reused. Each use re-times the eager baseline briefly
// (TimingProtocol.drift_check_ms) and compares it with the cached time
// (`Drifted`): a machine whose speed moved re-measures, and so does an entry
// older than baseline_max_age_s.
//
//   std::optional<BaselineTimes> cached = cache.Get(key, absl::Minutes(15));
//   if (!cached || Drifted(cached->eager, recheck, protocol)) { ...measure...; cache.Put(key, times); }
//
// Thread-safe.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_BASELINE_CACHE_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_BASELINE_CACHE_H_

#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kforge/v1/verdict.pb.h"
#include "kforge/v1/verifier_options.pb.h"

namespace kforge {

struct BaselineTimes {
  kforge::v1::Timing eager;    // trials == 0: not measured
  kforge::v1::Timing compile;  // trials == 0: unavailable or not measured
  absl::Time measured;
};

// Whether a short re-check of a baseline says the machine's speed moved
// since `cached` was measured: the re-check's statistic off the cached one
// by more than protocol.drift_tolerance (relative), beyond what the two
// measurements' own spread explains.
bool Drifted(const kforge::v1::Timing& cached, const kforge::v1::Timing& recheck,
             const kforge::v1::TimingProtocol& protocol);

class BaselineCache {
 public:
  explicit BaselineCache(size_t max_entries = 4096) : max_entries_(max_entries) {}

  // The entry for `key` if it is younger than `max_age`.
  std::optional<BaselineTimes> Get(const std::string& key, absl::Duration max_age) const;
  void Put(const std::string& key, const BaselineTimes& times);

 private:
  const size_t max_entries_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, BaselineTimes> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_BASELINE_CACHE_H_
