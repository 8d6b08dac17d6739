#include "verifier_worker/funnel/timing_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <numeric>

namespace kforge {

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<long>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<long>(mid));
  return (lower + upper) / 2;
}

double TrimmedMean(std::vector<double> values, double trim) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t drop = static_cast<size_t>(std::floor(values.size() * trim));
  const auto first = values.begin() + static_cast<long>(drop);
  const auto last = values.end() - static_cast<long>(drop);
  if (first >= last) return Median(values);
  return std::accumulate(first, last, 0.0) / static_cast<double>(last - first);
}

double CoefficientOfVariation(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / values.size();
  if (mean <= 0) return 0;
  double sq = 0;
  for (double v : values) sq += (v - mean) * (v - mean);
  return std::sqrt(sq / static_cast<double>(values.size() - 1)) / mean;
}

kforge::v1::Timing SummarizeTiming(const std::vector<double>& device_ms,
                                   const std::vector<double>& host_ms,
                                   const kforge::v1::TimingProtocol& protocol) {
  kforge::v1::Timing timing;
  timing.set_trials(static_cast<int>(device_ms.size()));
  if (device_ms.empty()) return timing;
  timing.set_mean_ms(TrimmedMean(device_ms, protocol.trim_fraction()));
  timing.set_median_ms(Median(device_ms));
  timing.set_min_ms(*std::min_element(device_ms.begin(), device_ms.end()));
  timing.set_cv(CoefficientOfVariation(device_ms));
  timing.set_host_mean_ms(TrimmedMean(host_ms, protocol.trim_fraction()));
  return timing;
}

double Representative(const kforge::v1::Timing& timing,
                      const kforge::v1::TimingProtocol& protocol) {
  return protocol.statistic() == kforge::v1::TIMING_MEDIAN ? timing.median_ms() : timing.mean_ms();
}

namespace {

// How far the candidate's host-over-event lead may exceed the reference's
// (a synchronise's own jitter), and how far the reference's may exceed its
// cached one before the moment counts as busy.
constexpr double kHostLeadMarginMs = 0.05;

double HostLead(const kforge::v1::Timing& t) {
  return t.trials() > 0 ? t.host_mean_ms() - t.mean_ms() : 0.0;
}

}  // namespace

bool ReferenceBusierNow(const kforge::v1::Timing& cached, const kforge::v1::Timing& now) {
  return cached.trials() > 0 && now.trials() > 0 &&
         HostLead(now) > HostLead(cached) + kHostLeadMarginMs;
}

HostGapJudgement JudgeHostGap(const kforge::v1::Timing& candidate, const kforge::v1::Timing& eager,
                              const kforge::v1::Timing* eager_now,
                              const kforge::v1::TimingProtocol& protocol) {
  HostGapJudgement judged;
  judged.lead_ms = HostLead(candidate);
  judged.reference_ms = HostLead(eager);
  if (eager_now != nullptr && protocol.host_gap_from_recheck()) {
    judged.reference_ms = std::max(judged.reference_ms, HostLead(*eager_now));
  }
  judged.suspected =
      judged.lead_ms > (protocol.host_event_ratio_flag() - 1) * std::max(candidate.mean_ms(), 0.01) &&
      judged.lead_ms > judged.reference_ms + kHostLeadMarginMs;
  return judged;
}

double SpeedupOverFasterBaseline(double vs_eager, double vs_compile) {
  return vs_compile > 0 ? std::min(vs_eager, vs_compile) : vs_eager;
}

FreshCallJudgement JudgeFreshTimes(const std::vector<std::pair<int, double>>& fresh,
                                   const std::vector<double>& trial_ms,
                                   const std::set<int>& untimed_calls, double trials_median_ms,
                                   const v1::TimingProtocol& protocol) {
  const double usual = std::max(trials_median_ms, protocol.fresh_input_floor_ms());
  const int window = protocol.fresh_input_neighbours();
  FreshCallJudgement closest;
  double closest_ratio = 0;
  for (const auto& [call, ms] : fresh) {
    // Trials ran at every call index but the untimed ones, in order.
    const long untimed_before = std::distance(untimed_calls.begin(), untimed_calls.lower_bound(call));
    const long trials_before =
        std::clamp<long>(call - untimed_before, 0, static_cast<long>(trial_ms.size()));
    const long first = std::max<long>(0, trials_before - window);
    FreshCallJudgement j{.fresh_ms = ms};
    if (window > 0 && trials_before > first) {
      j.neighbours_ms =
          *std::max_element(trial_ms.begin() + first, trial_ms.begin() + trials_before);
    }
    j.compared_ms = std::max(usual, j.neighbours_ms);
    const double ratio = j.compared_ms > 0 ? ms / j.compared_ms : 0;
    if (closest_ratio == 0 || ratio < closest_ratio) {
      closest = j;
      closest_ratio = ratio;
    }
  }
  closest.flagged = !fresh.empty() && closest_ratio > protocol.fresh_input_ratio_flag();
  return closest;
}

}  // namespace kforge
