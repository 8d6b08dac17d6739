#include "verifier_worker/funnel/reference_cache.h"

#include <vector>

namespace kforge {

absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> ReferenceCache::Get(
    const std::string& scope, const std::string& batch_id, const Reuse& reuse, const Maker& make,
    bool* reused) {
  absl::MutexLock lock(&mu_);
  Slot* slot = &slots_[scope];
  while (slot->making) {
    made_.Wait(&mu_);
    slot = &slots_[scope];  // the map may have rehashed
  }
  const absl::Time now = absl::Now();
  if (slot->epoch != nullptr && slot->batch_id == batch_id && slot->uses < reuse.max_uses &&
      now - slot->created < reuse.max_age) {
    ++slot->uses;
    slot->last_used = now;
    *reused = true;
    return slot->epoch;
  }
  *reused = false;
  slot->making = true;
  absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> made;
  {
    // Other scopes go on while this one is computed (seconds, on the
    // reference server).
    mu_.Unlock();
    made = make();
    mu_.Lock();
  }
  slot = &slots_[scope];
  slot->making = false;
  made_.SignalAll();
  if (!made.ok()) return made.status();
  slot->epoch = *made;
  slot->batch_id = batch_id;
  slot->uses = 1;
  slot->created = slot->last_used = absl::Now();
  EvictLocked(scope);
  return *made;
}

void ReferenceCache::EvictLocked(const std::string& keep) {
  int64_t total = 0;
  for (const auto& [scope, slot] : slots_) total += slot.epoch ? slot.epoch->bytes() : 0;
  while (total > max_bytes_) {
    // The least recently used epoch other than `keep` that nobody is making.
    auto victim = slots_.end();
    for (auto it = slots_.begin(); it != slots_.end(); ++it) {
      if (it->first == keep || it->second.making || it->second.epoch == nullptr) continue;
      if (victim == slots_.end() || it->second.last_used < victim->second.last_used) victim = it;
    }
    if (victim == slots_.end()) return;
    total -= victim->second.epoch->bytes();
    slots_.erase(victim);
  }
}

int ReferenceCache::size() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [scope, slot] : slots_) n += slot.epoch != nullptr;
  return n;
}

int64_t ReferenceCache::bytes() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [scope, slot] : slots_) total += slot.epoch ? slot.epoch->bytes() : 0;
  return total;
}

}  // namespace kforge
