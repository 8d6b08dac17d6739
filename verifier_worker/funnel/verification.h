// One candidate's way through the funnel (Funnel::Run): the request, what
// has been learned so far and the verdict being written. Private to the
// funnel; each stage lives in a file of its own:
//
//   verification.cc       orchestration, stage bookkeeping, session errors
//   static_stage.cc       stage 1 (the zygote's AST check)
//   reference_stage.cc    the task's shared reference epoch (ReferenceCache)
//   correctness_stages.cc stages 2-4, with launch attribution
//   timing_stage.cc       stage 5: cached baselines, budgeted candidate
//                         timing, fresh-input probes
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_VERIFICATION_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_VERIFICATION_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "kforge/v1/verifier_service.pb.h"
#include "verifier_worker/funnel/funnel.h"
#include "verifier_worker/funnel/launch_attribution.h"
#include "verifier_worker/funnel/reference_cache.h"
#include "verifier_worker/funnel/reference_set.h"

namespace kforge {

// A request to a candidate's sandbox that shares the GPU, as it came back:
// the reply, its wall time, and of that the wait for the GPU.
struct DeviceReply {
  absl::StatusOr<Frame> reply = absl::UnknownError("not asked");
  absl::Duration round_trip;
  absl::Duration waited;
  // The round trip less the wait: what the request itself took.
  absl::Duration own() const { return round_trip - waited; }
};

// A short hex digest of text (task sources, options) for cache keys.
std::string HexHash(const std::string& text);

// A list of strings as a frame field ("sets", "secret_dirs").
google::protobuf::Value StringList(const std::vector<std::string>& items);

class Funnel::Run {
 public:
  Run(Funnel& funnel, const v1::VerifyRequest& request)
      : f_(funnel), request_(request), options_(request.options()),
        limits_(options_.limits()), started_(absl::Now()) {}

  v1::Verdict Execute();

 private:
  // -- bookkeeping (verification.cc) --
  v1::StageResult* Begin(v1::Stage stage);
  bool End(v1::StageResult* stage, v1::StageOutcome outcome, const std::string& message = "");
  void Flag(v1::HackFlag flag, const std::string& detail);
  // A request to the candidate that did not come back (sandbox_ is set).
  bool EndWithSessionError(v1::StageResult* stage, const absl::Status& status);
  // A reply of type "failed" (the candidate raised, or a harness check).
  bool EndWithFailedReply(v1::StageResult* stage, const Frame& reply, const std::string& context);
  // Ends the stage (true) where a timing reply holds a time no clock gives.
  bool EndWithImpossibleTime(v1::StageResult* stage, const Frame& reply,
                             const std::string& context);
  bool cuda() const;
  // Adds `d` to the part `part` of `stage` (StageResult.part_seconds).
  static void AddPart(v1::StageResult* stage, const char* part, absl::Duration d);
  // The epoch's set of that name (an empty, not-ok set when there is none).
  const ReferenceSet& SetNamed(const std::string& name) const;
  v1::Verdict Finish();
  // Offers the candidate a shared buffer of `bytes` for its reply's tensors
  // (written there once, from the GPU, instead of copied through the
  // socket; sealed before it is read). Without one, they take the socket.
  void OfferReplyBuffer(Frame& request, uint64_t bytes);

  // -- stages --
  bool Static();            // static_stage.cc
  bool PrepareReference();  // reference_stage.cc
  bool CompileAndTinyRun();  // correctness_stages.cc
  // The set the compile stage runs: the tiny one, or the task's own inputs
  // where the reference has no tiny set.
  const ReferenceSet& TinySet() const;
  // A correctness request to the candidate: it shares the GPU with other
  // candidates' correctness runs, never with a timing.
  // `preemptible`: a timing stops it at once (GpuArbiter::Shared). The
  // wait is added to the verdict's device_wait_seconds.
  DeviceReply AskSharingDevice(const Frame& request, absl::Duration timeout,
                               bool preemptible = false);
  // The same without touching the verdict (the caller adds the wait): safe
  // from another thread while this one works on the verdict, as long as no
  // other request to the sandbox is in flight.
  DeviceReply AskSharingDeviceFromAnyThread(const Frame& request, absl::Duration timeout,
                                            bool preemptible) const;
  // How many times stage 4 runs the set (twice for the self-consistency
  // check on the task's own inputs).
  int RepeatOf(const ReferenceSet& set) const;
  // The warm request (MultiInputOptions.warm_variant_sets): at the start of
  // stage 4, before its sets, or with `background` just before the task's
  // own inputs (the sandbox answers at once and compiles while the sets
  // run); false when it ended the stage.
  bool WarmVariantSets(v1::StageResult* stage, absl::Duration timeout, bool background);
  // Adds to the verdict's device_wait_seconds.
  void AddDeviceWait(absl::Duration wait);
  bool MultiInput();
  // Adds a set's result to the verdict with its round trip (GPU waits left
  // out), its comparison and the candidate's call time as its harness
  // reported it.
  void RecordSet(const v1::InputSetResult& result, absl::Duration round_trip,
                 absl::Duration compare, const Frame& reply);
  // Adds a recorded run's launches; false (stage ended, flagged) when the
  // candidate ran library compute and attribution is enforced.
  bool Attribute(v1::StageResult* stage, const google::protobuf::Value* launches,
                 const std::string& where);
  bool AttributionEnforced() const;
  // Stage 5 (timing_stage.cc): measured with the GPU alone and the task's
  // reference server held (false: the stage ended), then judged once both
  // are free again, so other candidates do not wait for the comparisons.
  bool MeasureTiming(v1::StageResult* stage);
  void JudgeTiming(v1::StageResult* stage);

  // -- timing helpers (timing_stage.cc) --
  Frame BudgetFrame(const std::string& type, int min_trials, double min_ms, double max_ms,
                    bool warm_up) const;
  void AddBaselineFields(const std::string& mode, Frame& request) const;
  bool CompileBaseline() const;
  void ChooseTimingPool();
  // Before timing takes the device alone: baselines not cached yet are
  // built and run once (torch.compile compiles), holding no device lock.
  void WarmBaselines();
  absl::StatusOr<v1::Timing> TimeBaseline(const std::string& mode, int min_trials,
                                          double min_ms, double max_ms, bool* unavailable);
  // Eager and compile times, from the baseline cache or measured now.
  bool Baselines(v1::StageResult* stage);
  // The requests of the measuring half (their replies kept in measured_)
  // and the judging half's checks of them; each false when it ended the
  // stage.
  bool RequestTimedRuns(v1::StageResult* stage);
  bool RequestAttributeAfterTiming(v1::StageResult* stage);
  bool JudgeTimedRuns(v1::StageResult* stage);
  // The fresh-input calls among the timed ones: each output checked, the
  // fastest's time kept in measured_.fresh_fastest_ms.
  bool JudgeFreshCalls(v1::StageResult* stage, std::vector<std::string>& problems);
  // The candidate process's CPU time over the timed runs' request against
  // its wall time, both read by the verifier (the CPU only).
  void JudgeCpuTime(std::vector<std::string>& problems);
  // The fresh-input probes' sets of the epoch.
  std::vector<std::string> FreshSets() const;
  std::string BaselineKey() const;

  Funnel& f_;
  const v1::VerifyRequest& request_;
  const v1::VerifierOptions& options_;
  const v1::SandboxLimits& limits_;
  const absl::Time started_;
  absl::Time stage_start_;
  v1::Verdict verdict_;
  std::string code_;
  std::string cache_key_;
  std::vector<std::string> own_kernels_;
  std::optional<LaunchAttribution> attribution_;
  std::shared_ptr<const ReferenceEpoch> epoch_;  // from PrepareReference on
  std::vector<std::string> pool_;                // timing's input sets
  std::unique_ptr<CandidateSandbox> sandbox_;    // from the compile stage on
  bool internal_error_ = false;
  // The task's reference server, held through the timing stage.
  ReferenceClient::Held* reference_held_ = nullptr;
  // The timing stage's replies, from its measuring half to its judging one,
  // and the eager baseline's drift re-check (timed just before, under the
  // same hold of the GPU) where one ran.
  struct MeasuredTiming {
    std::optional<Frame> timed, attributed;
    // The fresh-input sets sent with the timed runs, the call each was
    // drawn for, the calls that were no trial (these and the recorded
    // ones), and the fastest call on them (0: none).
    std::vector<std::string> fresh_sent;
    std::vector<int> fresh_calls;
    std::set<int> untimed_calls;
    double fresh_fastest_ms = 0;
    // The candidate process's CPU time and the wall time over the timed
    // runs' request, by the verifier's clocks (CandidateSession::CpuTime).
    double cpu_ms = 0, wall_ms = 0;
    std::optional<v1::Timing> eager_now;
    // The re-check showed the host busier than when the baseline was cached
    // (ReferenceBusierNow): a clocks-only verdict of this moment is not kept.
    bool reference_busier = false;
  };
  MeasuredTiming measured_;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_VERIFICATION_H_
