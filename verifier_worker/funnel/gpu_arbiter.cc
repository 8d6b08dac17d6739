#include "verifier_worker/funnel/gpu_arbiter.h"

#include <signal.h>

#include <algorithm>

namespace kforge {

GpuArbiter::Shared::Shared(GpuArbiter& arbiter, int pgid, absl::Duration* waited,
                           bool preemptible)
    : arbiter_(arbiter),
      pgid_(pgid),
      preemptible_(preemptible && pgid > 0),
      stopped_since_(absl::InfinitePast()) {
  const absl::Time asked = absl::Now();
  absl::MutexLock lock(&arbiter_.mu_);
  arbiter_.mu_.Await(absl::Condition(
      +[](Shared* use) ABSL_EXCLUSIVE_LOCKS_REQUIRED(use->arbiter_.mu_) {
        const GpuArbiter& a = use->arbiter_;
        if (a.exclusive_) return false;
        if (a.exclusive_waiting_ == 0) return true;
        // A timing waits. While work it waits for anyway holds the GPU (a
        // reference epoch's make: seconds), a candidate's request goes
        // ahead rather than queue behind both; no such work starts now,
        // so the timing's wait still ends.
        return use->pgid_ > 0 && a.unstoppable_ > 0;
      },
      this));
  if (waited != nullptr) *waited += absl::Now() - asked;
  if (pgid_ > 0) {
    arbiter_.stoppable_.insert(this);
    if (!preemptible_) ++arbiter_.drained_;
    ::kill(-pgid_, SIGCONT);
  } else {
    ++arbiter_.unstoppable_;
  }
}

GpuArbiter::Shared::~Shared() {
  absl::MutexLock lock(&arbiter_.mu_);
  if (pgid_ > 0) {
    arbiter_.stoppable_.erase(this);
    if (!preemptible_) --arbiter_.drained_;
    // Stopped whether or not a timing resumed it in the meantime, unless
    // another use of the same process group is still open (a background
    // warm-up held across a candidate's requests).
    const bool still_used =
        std::any_of(arbiter_.stoppable_.begin(), arbiter_.stoppable_.end(),
                    [this](const Shared* other) { return other->pgid_ == pgid_; });
    if (!still_used) ::kill(-pgid_, SIGSTOP);
  } else {
    --arbiter_.unstoppable_;
  }
}

absl::Duration GpuArbiter::Shared::stopped() const {
  absl::MutexLock lock(&arbiter_.mu_);
  return stopped_since_ == absl::InfinitePast() ? stopped_
                                                : stopped_ + (absl::Now() - stopped_since_);
}

GpuArbiter::Exclusive::Exclusive(GpuArbiter& arbiter, absl::Duration* waited)
    : arbiter_(arbiter) {
  const absl::Time asked = absl::Now();
  absl::MutexLock lock(&arbiter_.mu_);
  ++arbiter_.exclusive_waiting_;
  arbiter_.mu_.Await(absl::Condition(
      +[](GpuArbiter* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(a->mu_) {
        return !a->exclusive_ && a->unstoppable_ == 0 &&
               (a->stop_requests_ || a->drained_ == 0);
      },
      &arbiter_));
  --arbiter_.exclusive_waiting_;
  arbiter_.exclusive_ = true;
  const absl::Time now = absl::Now();
  for (Shared* use : arbiter_.stoppable_) {
    ::kill(-use->pgid_, SIGSTOP);
    use->stopped_since_ = now;
    ++stopped_requests_;
  }
  if (waited != nullptr) *waited += now - asked;
}

GpuArbiter::Exclusive::~Exclusive() {
  absl::MutexLock lock(&arbiter_.mu_);
  const absl::Time now = absl::Now();
  for (Shared* use : arbiter_.stoppable_) {
    if (use->stopped_since_ != absl::InfinitePast()) {
      use->stopped_ += now - use->stopped_since_;
      use->stopped_since_ = absl::InfinitePast();
    }
    ::kill(-use->pgid_, SIGCONT);
  }
  arbiter_.exclusive_ = false;
}

int GpuArbiter::timings_waiting() const {
  absl::MutexLock lock(&mu_);
  return exclusive_waiting_;
}

}  // namespace kforge
