// Statistics of timed trials: trimmed mean or median, spread (coefficient
// of variation), and the speedup of a candidate over a baseline.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_TIMING_STATS_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_TIMING_STATS_H_

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

// The protocol's statistic of a Timing (trimmed mean or median).
double Representative(const kforge::v1::Timing& timing, const kforge::v1::TimingProtocol& protocol);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_TIMING_STATS_H_
