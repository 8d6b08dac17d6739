#include "verifier_worker/verifier_metrics.h"

#include "absl/strings/ascii.h"
#include "common/metrics/metric_builders.h"

namespace kforge {
namespace {

// "STAGE_TINY_RUN" -> "tiny_run"; "OUTCOME_PASSED" -> "passed".
std::string Label(const std::string& enum_name) {
  const size_t underscore = enum_name.find('_');
  return absl::AsciiStrToLower(underscore == std::string::npos ? enum_name
                                                               : enum_name.substr(underscore + 1));
}

const prometheus::Histogram::BucketBoundaries& StageBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
  return kBuckets;
}

}  // namespace

VerifierMetrics::VerifierMetrics(prometheus::Registry& registry)
    : streams_cancelled(NewCounter(registry, "kforge_verifier_streams_cancelled_total",
                                   "VerifyStream calls the client hung up on before it was done.")),
      queue_depth(NewGauge(registry, "kforge_verifier_queue_depth",
                           "Candidates accepted and waiting for a verification slot.")),
      in_flight(NewGauge(registry, "kforge_verifier_candidates_in_flight",
                         "Candidates being verified now.")),
      zygote_up(NewGauge(registry, "kforge_verifier_zygote_up",
                         "1 while the candidate zygote is running.")),
      spare_sandboxes(NewGauge(registry, "kforge_verifier_spare_sandboxes",
                               "Sandboxed candidate processes started (and warmed) ahead of "
                               "their candidates, ready now.")),
      reference_cache_bytes(NewGauge(registry, "kforge_verifier_reference_cache_bytes",
                                     "Host memory held by shared reference epochs (input sets "
                                     "and reference outputs).")),
      verdicts_(NewCounterFamily(registry, "kforge_verifier_verdicts_total",
                                 "Verdicts by the last stage reached and its outcome.")),
      stage_seconds_(NewHistogramFamily(registry, "kforge_verifier_stage_duration_seconds",
                                        "Wall time of each funnel stage.")),
      gpu_wait_seconds_(NewHistogramFamily(registry, "kforge_verifier_gpu_wait_seconds",
                                           "Per verification, the time spent waiting for the "
                                           "GPU: correctness requests while another candidate "
                                           "is timed, a timing until it has the GPU alone.")
                            .Add({}, StageBuckets())),
      hack_flags_(NewCounterFamily(registry, "kforge_verifier_hack_flags_total",
                                   "Reward-hacking patterns detected, by flag.")),
      kills_(NewCounterFamily(registry, "kforge_verifier_sandbox_kills_total",
                              "Candidate processes killed, by reason.")),
      cache_hits_(NewCounter(registry, "kforge_verifier_cache_hits_total",
                             "Verdicts served from the cache.")),
      cache_misses_(NewCounter(registry, "kforge_verifier_cache_misses_total",
                               "Verdict cache lookups that missed.")),
      sandboxes_(NewCounterFamily(registry, "kforge_verifier_sandboxes_total",
                                  "Candidate sandboxes used, by source: a spare made ahead, or "
                                  "started on demand.")),
      deliveries_(NewCounterFamily(registry, "kforge_verifier_deliveries_total",
                                   "Scored samples handed to the learner, by its acknowledgement "
                                   "(accepted, duplicate, stale, orphaned, rejected) or failed.")),
      stream_rejections_(NewCounterFamily(registry, "kforge_verifier_stream_rejections_total",
                                          "VerifyStream requests refused on receipt, by reason "
                                          "(invalid, duplicate, no_credit: sent with a credit "
                                          "taken back on its way).")),
      reference_lookups_(NewCounterFamily(registry, "kforge_verifier_reference_epochs_total",
                                          "Candidates' reference work, by result: reused (the "
                                          "task's current epoch) or computed (a new epoch).")),
      reference_epoch_seconds_(NewHistogramFamily(
          registry, "kforge_verifier_reference_epoch_seconds",
          "A new reference epoch's time, by part: compute (the reference server's input "
          "sets and outputs, GPU waits left out), transfer (bytes fetched that did not fit "
          "its buffer), share (inputs copied into the buffers candidates map).")),
      reference_prefetches_(NewCounterFamily(
          registry, "kforge_verifier_reference_prefetches_total",
          "Reference epochs of the batch candidates name next, made ahead, by result: made, "
          "held (one was there by then), failed, full (not queued).")),
      baseline_lookups_(NewCounterFamily(registry, "kforge_verifier_baseline_lookups_total",
                                         "Candidates' baseline timings, by result: hit (cached "
                                         "and re-checked), miss (measured), drift (re-check "
                                         "moved, re-measured).")),
      slot_seconds_(NewCounterFamily(registry, "kforge_verifier_slot_seconds_total",
                                     "Slot-seconds of the verification slots (max_concurrent) "
                                     "by state: busy (a candidate in the funnel) or idle. "
                                     "busy / (busy + idle) is the share of capacity used.")),
      slots_(NewGauge(registry, "kforge_verifier_slots",
                      "Candidates verified at once at most (max_concurrent).")) {
  for (const char* reason : {"invalid", "duplicate", "no_credit"}) {
    stream_rejections_.Add({{"reason", reason}});
  }
  for (const char* state : {"busy", "idle"}) slot_seconds_.Add({{"state", state}});
}

void VerifierMetrics::RecordSlotTime(const SlotClock::Reading& reading, int slots) {
  IncrementToward(slot_seconds_.Add({{"state", "busy"}}), reading.busy, last_slots_.busy);
  IncrementToward(slot_seconds_.Add({{"state", "idle"}}), reading.idle, last_slots_.idle);
  slots_.Set(slots);
  last_slots_ = reading;
}

void VerifierMetrics::RecordVerdict(const kforge::v1::Verdict& verdict) {
  const auto& stages = verdict.stages();
  const std::string outcome =
      stages.empty() ? "unspecified" : Label(kforge::v1::StageOutcome_Name(stages.rbegin()->outcome()));
  verdicts_.Add({{"stage", Label(kforge::v1::Stage_Name(verdict.stage_reached()))},
                 {"outcome", outcome}})
      .Increment();
  if (verdict.cached()) return;
  gpu_wait_seconds_.Observe(verdict.device_wait_seconds());
  for (const auto& stage : stages) {
    if (stage.outcome() == kforge::v1::OUTCOME_SKIPPED) continue;
    stage_seconds_.Add({{"stage", Label(kforge::v1::Stage_Name(stage.stage()))}}, StageBuckets())
        .Observe(stage.seconds());
  }
  for (int flag : verdict.hack_flags()) {
    hack_flags_.Add({{"flag", Label(kforge::v1::HackFlag_Name(static_cast<kforge::v1::HackFlag>(flag)))}})
        .Increment();
  }
}

void VerifierMetrics::RecordKill(const std::string& reason) {
  kills_.Add({{"reason", reason}}).Increment();
}

void VerifierMetrics::RecordDelivery(const std::string& result) {
  deliveries_.Add({{"result", result}}).Increment();
}

void VerifierMetrics::RecordStreamRejection(const std::string& reason) {
  stream_rejections_.Add({{"reason", reason}}).Increment();
}

void VerifierMetrics::RecordSandbox(bool spare) {
  sandboxes_.Add({{"source", spare ? "spare" : "on_demand"}}).Increment();
}

void VerifierMetrics::RecordReferenceLookup(bool reused) {
  reference_lookups_.Add({{"result", reused ? "reused" : "computed"}}).Increment();
}

void VerifierMetrics::RecordReferenceEpoch(double compute_s, double transfer_s,
                                           double share_s) {
  reference_epoch_seconds_.Add({{"part", "compute"}}, StageBuckets()).Observe(compute_s);
  reference_epoch_seconds_.Add({{"part", "transfer"}}, StageBuckets()).Observe(transfer_s);
  reference_epoch_seconds_.Add({{"part", "share"}}, StageBuckets()).Observe(share_s);
}

void VerifierMetrics::RecordReferencePrefetch(const std::string& result) {
  reference_prefetches_.Add({{"result", result}}).Increment();
}

void VerifierMetrics::RecordBaselineLookup(const std::string& result) {
  baseline_lookups_.Add({{"result", result}}).Increment();
}

void VerifierMetrics::RecordCacheLookup(bool hit) {
  (hit ? cache_hits_ : cache_misses_).Increment();
}

}  // namespace kforge
