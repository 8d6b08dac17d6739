// StreamCredits: the verifier's admission places (max_concurrent +
// max_queued) shared out as VerifyStream credits, so that what the open
// streams hold (credits granted and not yet spent, plus requests admitted and
// not yet answered) never exceeds the places. A client that sends only with
// a credit is then never refused as "full", however many streams are open.
//
//   StreamCredits credits(config.max_concurrent() + config.max_queued());
//   const int64_t id = credits.Open([&](int n) { WriteCredit(n); });
//   if (credits.Spend(id)) Run(request);      // a request arrived
//   credits.Finish(id);                       // it was answered
//   credits.Close(id);                        // the stream ended
//
// SHARING. Each open stream is owed an equal share, ceil(places / streams),
// at least one. A place that frees up goes to the open stream furthest below
// its share (streams equally short take turns). When a stream opens and no
// place is free, unspent credits of streams above their share are taken back
// (a negative grant) and given to it, so an idle stream never starves a busy
// one; requests already admitted are never taken back. A client may have
// spent a credit that was taken back before it heard: that request is
// refused as sent without a credit and the client's count is made whole
// again (VerifierServiceImpl), so it is re-sent, not lost. A unary Verify
// takes a free place, or an unspent credit back.
//
// Grants are handed to the stream's callback after the ledger's lock is
// released; the callback may drop a grant for a stream that is closing (its
// credits are freed by Close). Thread-safe.
#ifndef KFORGE_VERIFIER_WORKER_STREAM_CREDITS_H_
#define KFORGE_VERIFIER_WORKER_STREAM_CREDITS_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>

#include "absl/synchronization/mutex.h"

namespace kforge {

class StreamCredits {
 public:
  // Writes a grant of `credits` to its stream (negative: taken back).
  using Grant = std::function<void(int credits)>;
  struct Stats {
    int places = 0;
    int streams = 0;
    int held = 0;      // granted, not yet spent
    int admitted = 0;  // stream requests admitted, not yet finished
    int unary = 0;     // unary calls running
  };

  explicit StreamCredits(int places) : places_(places < 1 ? 1 : places) {}
  StreamCredits(const StreamCredits&) = delete;
  StreamCredits& operator=(const StreamCredits&) = delete;

  // A new stream; its first credits reach `grant` before Open returns when
  // places are free.
  int64_t Open(Grant grant) ABSL_LOCKS_EXCLUDED(mu_);
  // The stream ended: what it held is free again and shared out. Call it
  // after every admitted request of the stream has finished.
  void Close(int64_t stream) ABSL_LOCKS_EXCLUDED(mu_);
  // A request arrived with a credit: spends it and admits the request.
  // false when the stream held none (the client sent without a credit).
  bool Spend(int64_t stream) ABSL_LOCKS_EXCLUDED(mu_);
  // An admitted request of the stream was answered: its place is shared out.
  void Finish(int64_t stream) ABSL_LOCKS_EXCLUDED(mu_);
  // A unary call takes a place no stream holds, or else an unspent credit
  // taken back from the stream holding the most; false when every place
  // is working.
  bool TakeUnary() ABSL_LOCKS_EXCLUDED(mu_);
  void FinishUnary() ABSL_LOCKS_EXCLUDED(mu_);
  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Stream {
    Grant grant;
    int held = 0;
    int admitted = 0;
    int owned() const { return held + admitted; }
    // Unspent credits above `share`: what may be taken back.
    int spare(int share) const { return std::min(held, owned() - share); }
  };
  struct Pending {
    Grant grant;
    int credits = 0;
  };
  // Adds `credits` (negative: taken back) to `stream`'s grant in `grants`.
  static void AddGrant(std::map<int64_t, Pending>& grants, int64_t id, const Stream& stream,
                       int credits);
  // Shares free places out; returns the grants to hand over unlocked.
  std::map<int64_t, Pending> ShareOut() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Hand(std::map<int64_t, Pending> grants);

  const int places_;
  mutable absl::Mutex mu_;
  std::map<int64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t last_served_ ABSL_GUARDED_BY(mu_) = 0;
  int used_ ABSL_GUARDED_BY(mu_) = 0;  // held + admitted over streams, + unary
  int unary_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_STREAM_CREDITS_H_
