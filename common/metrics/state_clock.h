// StateClock: attributes the wall time of one actor (a thread, a device) to
// the state it is in, for "busy / idle seconds" counters. The actor says
// when it changes state; any thread reads the totals, the current state's
// time so far included, so a long idle stretch shows while it lasts.
//
//   StateClock clock(3, /*initial=*/kIdle, absl::Now());
//   clock.Enter(kGenerating, absl::Now());
//   std::vector<absl::Duration> spent = clock.Totals(absl::Now());
//
// Times are passed in, never read here, so tests drive it with made-up
// instants. An instant earlier than the last one counts as the last one
// (a time is never taken back). Thread-safe.
#ifndef KFORGE_COMMON_METRICS_STATE_CLOCK_H_
#define KFORGE_COMMON_METRICS_STATE_CLOCK_H_

#include <algorithm>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kforge {

class StateClock {
 public:
  // `states` states numbered 0..states-1, starting in `initial` at `now`.
  StateClock(int states, int initial, absl::Time now)
      : totals_(static_cast<size_t>(states)), state_(initial), since_(now) {}

  // Leaves the current state for `state` at `now`.
  void Enter(int state, absl::Time now) {
    absl::MutexLock lock(&mu_);
    Settle(now);
    state_ = state;
  }

  // Time spent in each state up to `now`.
  std::vector<absl::Duration> Totals(absl::Time now) const {
    absl::MutexLock lock(&mu_);
    std::vector<absl::Duration> totals = totals_;
    totals[static_cast<size_t>(state_)] += std::max(absl::ZeroDuration(), now - since_);
    return totals;
  }

 private:
  void Settle(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (now <= since_) return;
    totals_[static_cast<size_t>(state_)] += now - since_;
    since_ = now;
  }

  mutable absl::Mutex mu_;
  std::vector<absl::Duration> totals_ ABSL_GUARDED_BY(mu_);
  int state_ ABSL_GUARDED_BY(mu_);
  absl::Time since_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_COMMON_METRICS_STATE_CLOCK_H_
