#include "verifier_worker/funnel/baseline_cache.h"

#include <cmath>

#include "verifier_worker/funnel/timing_stats.h"

namespace kforge {

bool Drifted(const v1::Timing& cached, const v1::Timing& recheck,
             const v1::TimingProtocol& protocol) {
  const double base = Representative(cached, protocol);
  const double now = Representative(recheck, protocol);
  if (base <= 0 || now <= 0 || recheck.trials() == 0) return false;
  // A short re-check of a noisy kernel moves by its own spread: allow three
  // standard errors of the re-check on top of the tolerance.
  const double stderr_rel =
      recheck.trials() > 1 ? recheck.cv() / std::sqrt(static_cast<double>(recheck.trials())) : 0;
  return std::abs(now / base - 1.0) > protocol.drift_tolerance() + 3 * stderr_rel;
}

std::optional<BaselineTimes> BaselineCache::Get(const std::string& key,
                                                absl::Duration max_age) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || absl::Now() - it->second.measured > max_age) return std::nullopt;
  return it->second;
}

void BaselineCache::Put(const std::string& key, const BaselineTimes& times) {
  absl::MutexLock lock(&mu_);
  if (entries_.size() >= max_entries_ && !entries_.contains(key)) {
    // Past the bound the oldest entry goes: tasks come and go with the
    // curriculum, and a re-measure is only a cost.
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.measured < oldest->second.measured) oldest = it;
    }
    entries_.erase(oldest);
  }
  entries_[key] = times;
}

}  // namespace kforge
