// Short forms for the metric families each component declares, and for
// counters that follow a tally kept elsewhere.
//
//   prometheus::Counter& jobs = NewCounter(registry, "kforge_learner_jobs_submitted_total", "...");
//   prometheus::Histogram& step = NewHistogram(registry, "kforge_..._seconds", "...", {0.1, 1, 10});
//   IncrementToward(jobs, stats.jobs, last.jobs);   // adds what the tally gained
#ifndef KFORGE_COMMON_METRICS_METRIC_BUILDERS_H_
#define KFORGE_COMMON_METRICS_METRIC_BUILDERS_H_

#include <cstdint>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/time/time.h"

namespace kforge {

inline prometheus::Counter& NewCounter(prometheus::Registry& registry, const std::string& name,
                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

// A labelled counter family: Add({{"label", "value"}}) gives each series.
inline prometheus::Family<prometheus::Counter>& NewCounterFamily(prometheus::Registry& registry,
                                                                 const std::string& name,
                                                                 const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

inline prometheus::Gauge& NewGauge(prometheus::Registry& registry, const std::string& name,
                                   const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

// A labelled gauge family: Add({{"label", "value"}}) gives each series.
inline prometheus::Family<prometheus::Gauge>& NewGaugeFamily(prometheus::Registry& registry,
                                                             const std::string& name,
                                                             const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

// A histogram without labels, with these bucket upper bounds.
inline prometheus::Histogram& NewHistogram(prometheus::Registry& registry, const std::string& name,
                                           const std::string& help,
                                           const prometheus::Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add({}, buckets);
}

// A labelled histogram family: Add({{"label", "value"}}, buckets) gives each series.
inline prometheus::Family<prometheus::Histogram>& NewHistogramFamily(
    prometheus::Registry& registry, const std::string& name, const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

// Adds now - before when the tally grew (counters never go down).
inline void IncrementToward(prometheus::Counter& counter, uint64_t now, uint64_t before) {
  if (now > before) counter.Increment(static_cast<double>(now - before));
}

// The same for a tally of time, in seconds.
inline void IncrementToward(prometheus::Counter& counter, absl::Duration now,
                            absl::Duration before) {
  if (now > before) counter.Increment(absl::ToDoubleSeconds(now - before));
}

}  // namespace kforge

#endif  // KFORGE_COMMON_METRICS_METRIC_BUILDERS_H_
