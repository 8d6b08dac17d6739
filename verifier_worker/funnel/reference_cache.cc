#include "verifier_worker/funnel/reference_cache.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace kforge {

std::string ReferenceCache::Key(const std::string& scope, const std::string& batch_id) {
  return absl::StrCat(scope, "\x1f", batch_id);
}

absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> ReferenceCache::Get(
    const std::string& scope, const std::string& batch_id, const Reuse& reuse, const Maker& make,
    bool* reused) {
  // One slot per scope and batch: candidates of two policy versions in
  // flight at once (asynchronous training) keep their own epochs instead of
  // replacing each other's.
  const std::string key = Key(scope, batch_id);
  mu_.Lock();
  int64_t waited_for = -1;  // the make this caller waited on, if any
  while (slots_[key].making) {
    waited_for = slots_[key].generation;
    made_.Wait(&mu_);
  }
  Slot* slot = &slots_[key];
  // The make this caller waited for failed: its error is this caller's too
  // (a reference that cannot run fails every candidate once, not in turn),
  // unless it was made ahead: then this caller makes the epoch itself.
  if (waited_for >= 0 && slot->generation == waited_for + 1 && !slot->last_error.ok() &&
      !slot->made_ahead) {
    absl::Status error = slot->last_error;
    mu_.Unlock();
    return error;
  }
  const absl::Time now = absl::Now();
  if (slot->epoch != nullptr && slot->uses < reuse.max_uses && now - slot->created < reuse.max_age) {
    ++slot->uses;
    slot->last_used = now;
    *reused = true;
    std::shared_ptr<const ReferenceEpoch> epoch = slot->epoch;
    mu_.Unlock();
    return epoch;
  }
  *reused = false;
  slot->making = true;
  mu_.Unlock();
  return RunMake(key, make, /*uses=*/1);
}

absl::StatusOr<bool> ReferenceCache::Prefetch(const std::string& scope,
                                              const std::string& batch_id, const Maker& make) {
  const std::string key = Key(scope, batch_id);
  {
    absl::MutexLock lock(&mu_);
    Slot& slot = slots_[key];
    if (slot.making || slot.epoch != nullptr || slot.ahead_spent) return false;
    slot.making = true;
  }
  absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> made = RunMake(key, make, /*uses=*/0);
  if (!made.ok()) return made.status();
  return true;
}

absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> ReferenceCache::RunMake(
    const std::string& key, const Maker& make, int uses) {
  // Other scopes go on while this one is computed (seconds, on the
  // reference server). `make` must not throw (it returns a status); were it
  // to, the guard below still clears `making` and wakes the waiters.
  struct Unwind {  // only if `make` threw: the normal path finishes below
    ReferenceCache* cache;
    const std::string* key;
    bool finished = false;
    ~Unwind() {
      if (!finished) {
        cache->FinishMake(*key, absl::InternalError("reference epoch not made"), 0);
      }
    }
  } unwind{this, &key};
  absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> made = make();
  FinishMake(key, made, uses);
  unwind.finished = true;
  return made;
}

void ReferenceCache::FinishMake(const std::string& key,
                                const absl::StatusOr<std::shared_ptr<const ReferenceEpoch>>& made,
                                int uses) {
  absl::MutexLock lock(&mu_);
  Slot& slot = slots_[key];
  slot.making = false;
  ++slot.generation;
  slot.last_error = made.status();
  slot.made_ahead = uses == 0;
  // A make ahead that failed is not tried ahead again (a reference that
  // cannot run would otherwise be retried for every candidate).
  if (slot.made_ahead && !made.ok()) slot.ahead_spent = true;
  if (made.ok()) {
    slot.epoch = *made;
    slot.uses = uses;
    slot.created = slot.last_used = absl::Now();
    // An epoch made ahead (no uses yet) is the first to go when the cache is
    // full, itself included: it never pushes out an epoch candidates use.
    if (uses == 0) slot.last_used = absl::InfinitePast();
    EvictLocked(uses == 0 ? std::string() : key);
  }
  made_.SignalAll();
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
    if (victim->second.made_ahead && victim->second.uses == 0) {
      // Made ahead and never used: keep the slot, without its bytes, so the
      // next candidates of the batch do not make it ahead again and again.
      victim->second.epoch = nullptr;
      victim->second.ahead_spent = true;
    } else {
      slots_.erase(victim);
    }
  }
}

bool ReferenceCache::Holds(const std::string& scope, const std::string& batch_id) const {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(Key(scope, batch_id));
  return it != slots_.end() &&
         (it->second.making || it->second.epoch != nullptr || it->second.ahead_spent);
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
