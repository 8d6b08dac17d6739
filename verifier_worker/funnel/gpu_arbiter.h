// Who uses the GPU when: candidates' correctness requests share it, a
// timing has it alone. A timing either waits for the requests in flight to
// end, or (stop_requests) does not wait for them (a first call's Triton
// compile keeps one going for a second or more): it stops their process
// groups (SIGSTOP) while it holds the GPU and resumes them after, and the
// stopped time does not count against their deadlines. Work that must not
// be stopped (the trusted reference server computing reference outputs, a
// spare sandbox warming up) is always waited for; preemptible requests (a
// warm-up of later sets' compiles) are always stopped. No new work starts
// while a timing runs, nor while it waits, except candidates' requests while
// work it must wait for holds the GPU: a reference epoch's make held every
// correctness request behind the timings queued behind it (on 4x H100, a
// GRPO job's first step: correct candidates waited up to 43 s to start a
// correctness run). Such a request, when not stopped, delays the timing by
// at most its own length past the make; new unstoppable work still waits,
// so the timing's wait ends.
//
//   GpuArbiter gpu(/*stop_requests=*/false);
//   { GpuArbiter::Shared use(gpu, session.pid(), &waited);   // resumes the pid
//     reply = session.Request(request, timeout,
//                             [&] { return use.stopped(); }); }  // stopped after
//   { GpuArbiter::Exclusive alone(gpu, &waited); Time(); }
//
// What a stopped process had already queued on the GPU still runs: an
// honest correctness call queues milliseconds, and a timing's warm-up runs
// first. Thread-safe.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_GPU_ARBITER_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_GPU_ARBITER_H_

#include <set>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kforge {

class GpuArbiter {
 public:
  // Shared use for a scope. `pgid` > 0: a candidate's process group, which
  // a timing may stop; it is resumed now and stopped again at the end of
  // the scope (a candidate runs only while it is asked something). `pgid`
  // <= 0: work a timing waits for. Several uses may hold one process group
  // at once (a background warm-up across its candidate's requests): it is
  // stopped when the last of them ends. `waited` (optional) gets the time spent
  // waiting for a timing to end before the use could start. `preemptible`
  // (with `pgid` > 0): a timing stops this use at once even when it waits
  // for the other requests to end (work that is mostly host compiles, whose
  // length would hold every timing back).
  class Shared {
   public:
    Shared(GpuArbiter& arbiter, int pgid, absl::Duration* waited = nullptr,
           bool preemptible = false);
    Shared(const Shared&) = delete;
    Shared& operator=(const Shared&) = delete;
    ~Shared();
    // How long timings have kept this use's processes stopped so far.
    absl::Duration stopped() const;

   private:
    friend class GpuArbiter;
    GpuArbiter& arbiter_;
    const int pgid_;
    const bool preemptible_;
    absl::Duration stopped_;       // guarded by arbiter_.mu_
    absl::Time stopped_since_;     // InfinitePast() while running
  };

  // The GPU alone for a scope.
  class Exclusive {
   public:
    explicit Exclusive(GpuArbiter& arbiter, absl::Duration* waited = nullptr);
    Exclusive(const Exclusive&) = delete;
    Exclusive& operator=(const Exclusive&) = delete;
    ~Exclusive();
    // How many requests in flight it stopped (their queued GPU work may
    // still be running).
    int stopped_requests() const { return stopped_requests_; }

   private:
    GpuArbiter& arbiter_;
    int stopped_requests_ = 0;
  };

  // `stop_requests` false: a timing waits for the stoppable requests in
  // flight to end instead of stopping them (no new one starts meanwhile),
  // except the preemptible ones, which it stops.
  explicit GpuArbiter(bool stop_requests) : stop_requests_(stop_requests) {}
  GpuArbiter(const GpuArbiter&) = delete;
  GpuArbiter& operator=(const GpuArbiter&) = delete;

  // Timings waiting for the GPU now.
  int timings_waiting() const;

 private:
  const bool stop_requests_;
  mutable absl::Mutex mu_;
  bool exclusive_ ABSL_GUARDED_BY(mu_) = false;
  int exclusive_waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int unstoppable_ ABSL_GUARDED_BY(mu_) = 0;  // shared uses a timing waits for
  std::set<Shared*> stoppable_ ABSL_GUARDED_BY(mu_);
  int drained_ ABSL_GUARDED_BY(mu_) = 0;  // stoppable, not preemptible
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_GPU_ARBITER_H_
