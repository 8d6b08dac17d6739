// Exponential back-off between attempts of a call that failed: the first
// wait is `initial`, each next one twice the last up to `max`, and a success
// starts over. The one rule for every retrying loop in kforge (CallWithRetry
// and the rollout worker's long polls), from the process's RpcPolicy. An
// initial wait above the cap is waited once, then the cap.
//
//   Backoff backoff(config.rpc());
//   while (running) {
//     if (!Call().ok()) { stop.WaitForNotificationWithTimeout(backoff.Next()); continue; }
//     backoff.Reset();
//   }
//
// Not thread-safe: one loop, one Backoff.
#ifndef KFORGE_COMMON_CLIENT_BACKOFF_H_
#define KFORGE_COMMON_CLIENT_BACKOFF_H_

#include <algorithm>


#include "absl/time/time.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge {

class Backoff {
 public:
  Backoff(absl::Duration initial, absl::Duration max)
      : initial_(initial), max_(max), next_(initial) {}
  explicit Backoff(const kforge::v1::RpcPolicy& policy)
      : Backoff(absl::Seconds(policy.backoff_initial_s()), absl::Seconds(policy.backoff_max_s())) {}

  // The wait before the next attempt; the one after it doubles (up to max).
  absl::Duration Next() {
    const absl::Duration wait = next_;
    next_ = std::min(next_ * 2, max_);
    return wait;
  }
  // After a success: the next failure waits `initial` again.
  void Reset() { next_ = initial_; }
  // Waits the longest from now on, for an answer that will not change soon
  // (a server without the method), until Reset.
  void Saturate() { next_ = max_; }

 private:
  absl::Duration initial_;
  absl::Duration max_;
  absl::Duration next_;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_CLIENT_BACKOFF_H_
