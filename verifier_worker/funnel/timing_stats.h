// Statistics of timed trials: trimmed mean or median, spread (coefficient
// of variation), and the speedup of a candidate over a baseline.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_TIMING_STATS_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_TIMING_STATS_H_

#include <set>
#include <utility>
#include <vector>

#include "kforge/v1/verdict.pb.h"
#include "kforge/v1/verifier_options.pb.h"

namespace kforge {

double Median(std::vector<double> values);
// Mean after dropping `trim` of the values from each end.
double TrimmedMean(std::vector<double> values, double trim);
// stddev / mean; 0 for fewer than two values.
double CoefficientOfVariation(const std::vector<double>& values);

// `device_ms` are the primary samples (event times on GPU, host times on
// CPU); `host_ms` the host-clock times around the same trials.
kforge::v1::Timing SummarizeTiming(const std::vector<double>& device_ms,
                                   const std::vector<double>& host_ms,
                                   const kforge::v1::TimingProtocol& protocol);

// The speedup judged for plausibility: over the faster baseline, since
// what torch.compile reaches is plausible by construction. `vs_compile` is
// 0 where compile was not timed.
double SpeedupOverFasterBaseline(double vs_eager, double vs_compile);

// The side-stream check. Work hidden from the timing events (queued on
// another stream, run by another thread) shows as the host clock's lead
// over them (host mean less event mean). It is suspected when the
// candidate's lead is above host_event_ratio_flag - 1 of its event time (at
// least 0.01 ms) and more than 0.05 ms above the honest eager reference's
// lead: its cached baseline's (`eager`), or, when larger and
// host_gap_from_recheck is on, its drift re-check's (`eager_now`, null
// where none ran), timed moments before under the same hold of the GPU: a
// busy host delays every synchronise, the reference's as much as the
// candidate's. (The host time starts at the call's end event: see
// Timing.host_mean_ms.)
struct HostGapJudgement {
  double lead_ms = 0;       // the candidate's host clock over its events
  double reference_ms = 0;  // the eager reference's lead allowed for
  bool suspected = false;
};
HostGapJudgement JudgeHostGap(const kforge::v1::Timing& candidate, const kforge::v1::Timing& eager,
                              const kforge::v1::Timing* eager_now,
                              const kforge::v1::TimingProtocol& protocol);

// Whether the eager reference's drift re-check (`now`) shows its host clock
// leading its events by more than the side-stream check's margin (0.05 ms)
// beyond what its cached baseline showed: a busy host, or another process's
// kernels on the GPU, at this moment. A verdict that may be the verifier's
// load (MayBeTheVerifiersLoad) is then not the candidate's to keep.
bool ReferenceBusierNow(const kforge::v1::Timing& cached, const kforge::v1::Timing& now);

// The fresh-input flag (TimingProtocol.fresh_input_probes). A fresh call is
// compared with the trials' median (floored at fresh_input_floor_ms) and,
// when that is higher, with the slowest of the fresh_input_neighbours
// trials that ran just before it, in its conditions: on a loaded node a
// call is now and then late to launch or shares the GPU with another
// process's kernels, trials as much as fresh calls, while a cache's hits
// before its miss stay fast. Only trials before the call count: a
// candidate cannot know a fresh call is coming, but could slow itself down
// once it has seen one. Flagged when every fresh call is above
// fresh_input_ratio_flag times what it is compared with; the judgement
// reported is the call closest to passing. (The time a speedup is computed
// from is never below the fastest fresh call, flagged or not.)
struct FreshCallJudgement {
  double fresh_ms = 0;       // that call's time
  double neighbours_ms = 0;  // the slowest of the trials just before it (0: none)
  double compared_ms = 0;    // what it was compared with
  bool flagged = false;
};
// `fresh`: (call index, time) of each fresh call; `trial_ms`: every trial's
// sample in the order the calls ran; `untimed_calls`: the call indices that
// were no trial (the fresh calls, and the recorded ones).
FreshCallJudgement JudgeFreshTimes(const std::vector<std::pair<int, double>>& fresh,
                                   const std::vector<double>& trial_ms,
                                   const std::set<int>& untimed_calls, double trials_median_ms,
                                   const kforge::v1::TimingProtocol& protocol);

// The protocol's statistic of a Timing (trimmed mean or median).
double Representative(const kforge::v1::Timing& timing, const kforge::v1::TimingProtocol& protocol);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_TIMING_STATS_H_
