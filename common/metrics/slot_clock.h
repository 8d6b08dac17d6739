// SlotClock: busy and idle time of a resource with a fixed number of slots
// (a verifier's `max_concurrent` candidates at once): busy is the integral
// of the slots in use over time, idle that of the slots free, both in
// slot-seconds, so busy / (busy + idle) is the share of its capacity the
// resource used. Readers see the time so far of the work in progress.
//
//   SlotClock clock(4, absl::Now());
//   clock.Begin(absl::Now());  ... clock.End(absl::Now());
//   SlotClock::Reading r = clock.Read(absl::Now());   // r.busy, r.idle
//
// Times are passed in, never read here, so tests drive it with made-up
// instants. More Begins than slots count as all slots busy (work queued
// beyond the slots is not busier). Thread-safe.
#ifndef KFORGE_COMMON_METRICS_SLOT_CLOCK_H_
#define KFORGE_COMMON_METRICS_SLOT_CLOCK_H_

#include <algorithm>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kforge {

class SlotClock {
 public:
  struct Reading {
    absl::Duration busy;  // slot-time in use
    absl::Duration idle;  // slot-time free
  };

  SlotClock(int slots, absl::Time now) : slots_(std::max(1, slots)), since_(now) {}

  void Begin(absl::Time now) {
    absl::MutexLock lock(&mu_);
    Settle(now);
    ++active_;
  }
  void End(absl::Time now) {
    absl::MutexLock lock(&mu_);
    Settle(now);
    if (active_ > 0) --active_;
  }

  Reading Read(absl::Time now) const {
    absl::MutexLock lock(&mu_);
    Reading reading = totals_;
    const absl::Duration elapsed = std::max(absl::ZeroDuration(), now - since_);
    const int busy = std::min(active_, slots_);
    reading.busy += elapsed * busy;
    reading.idle += elapsed * (slots_ - busy);
    return reading;
  }

 private:
  void Settle(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (now <= since_) return;
    const int busy = std::min(active_, slots_);
    totals_.busy += (now - since_) * busy;
    totals_.idle += (now - since_) * (slots_ - busy);
    since_ = now;
  }

  const int slots_;
  mutable absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  Reading totals_ ABSL_GUARDED_BY(mu_);
  absl::Time since_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_COMMON_METRICS_SLOT_CLOCK_H_
