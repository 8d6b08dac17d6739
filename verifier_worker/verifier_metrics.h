// Every metric family the verifier exports, declared in one place with the
// kforge_verifier_ prefix.
#ifndef KFORGE_VERIFIER_WORKER_VERIFIER_METRICS_H_
#define KFORGE_VERIFIER_WORKER_VERIFIER_METRICS_H_

#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/metrics/slot_clock.h"
#include "kforge/v1/verdict.pb.h"

namespace kforge {

class VerifierMetrics {
 public:
  explicit VerifierMetrics(prometheus::Registry& registry);

  // One verdict: its final stage and outcome, each stage's latency, flags.
  void RecordVerdict(const kforge::v1::Verdict& verdict);
  void RecordKill(const std::string& reason);
  void RecordCacheLookup(bool hit);
  // A candidate's reference work: the task's current epoch reused, or a new
  // epoch computed (new secret seeds and reference outputs).
  void RecordReferenceLookup(bool reused);
  // Where a new reference epoch's time went: the reference server's work,
  // the bytes fetched that did not fit its buffer, and the inputs copied
  // into the buffers candidates map (seconds).
  void RecordReferenceEpoch(double compute_s, double transfer_s, double share_s);
  // A reference epoch of a batch to come, made ahead: "made", "held" (one
  // was there by then), "failed", or "full" (not queued: the queue was).
  void RecordReferencePrefetch(const std::string& result);
  // A candidate's baselines: "hit" (cached, re-check within tolerance),
  // "miss" (none cached: measured) or "drift" (the re-check moved:
  // re-measured).
  void RecordBaselineLookup(const std::string& result);
  // A candidate got its sandbox: a spare made ahead, or one started for it.
  void RecordSandbox(bool spare);
  // One delivery of a scored sample to the learner: the ack's status
  // ("accepted", "duplicate", ...) or "failed".
  void RecordDelivery(const std::string& result);
  // One VerifyStream request refused on receipt, by reason: "invalid" (a
  // malformed request), "duplicate" (its id is in flight on the stream),
  // "no_credit", "full".
  void RecordStreamRejection(const std::string& reason);
  // The verification slots' busy and idle time so far (from one thread:
  // the metrics ticker), and their number.
  void RecordSlotTime(const SlotClock::Reading& reading, int slots);
  // A VerifyStream the client cancelled (hung up) before it was done.
  prometheus::Counter& streams_cancelled;

  prometheus::Gauge& queue_depth;
  prometheus::Gauge& in_flight;
  prometheus::Gauge& zygote_up;
  prometheus::Gauge& spare_sandboxes;
  prometheus::Gauge& reference_cache_bytes;

 private:
  prometheus::Family<prometheus::Counter>& verdicts_;
  prometheus::Family<prometheus::Histogram>& stage_seconds_;
  prometheus::Histogram& gpu_wait_seconds_;
  prometheus::Family<prometheus::Counter>& hack_flags_;
  prometheus::Family<prometheus::Counter>& kills_;
  prometheus::Counter& cache_hits_;
  prometheus::Counter& cache_misses_;
  prometheus::Family<prometheus::Counter>& sandboxes_;
  prometheus::Family<prometheus::Counter>& deliveries_;
  prometheus::Family<prometheus::Counter>& stream_rejections_;
  prometheus::Family<prometheus::Counter>& reference_lookups_;
  prometheus::Family<prometheus::Histogram>& reference_epoch_seconds_;
  prometheus::Family<prometheus::Counter>& reference_prefetches_;
  prometheus::Family<prometheus::Counter>& baseline_lookups_;
  prometheus::Family<prometheus::Counter>& slot_seconds_;
  prometheus::Gauge& slots_;
  SlotClock::Reading last_slots_;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_VERIFIER_METRICS_H_
