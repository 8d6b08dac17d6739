#include "learner/learner_metrics.h"

#include <string>

#include "absl/strings/ascii.h"

namespace kforge {
namespace {

prometheus::Counter& Counter(prometheus::Registry& registry, const std::string& name,
                             const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Gauge& Gauge(prometheus::Registry& registry, const std::string& name,
                         const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

}  // namespace

LearnerMetrics::LearnerMetrics(prometheus::Registry& registry)
    : jobs_submitted(Counter(registry, "kforge_learner_jobs_submitted_total",
                             "Jobs accepted by SubmitJob.")),
      jobs_rejected(Counter(registry, "kforge_learner_jobs_rejected_total",
                            "SubmitJob calls refused because the spec was invalid or the queue "
                            "was full.")),
      workers_registered(Gauge(registry, "kforge_learner_workers",
                               "Rollout workers currently registered and alive.")),
      worker_heartbeats(Counter(registry, "kforge_learner_worker_heartbeats_total",
                                "Heartbeats received from rollout workers.")),
      workers_expired(Counter(registry, "kforge_learner_workers_expired_total",
                              "Rollout workers dropped after missing heartbeats.")),
      jobs_by_state_(prometheus::BuildGauge()
                         .Name("kforge_learner_jobs")
                         .Help("Jobs known to the learner, by state.")
                         .Register(registry)) {
  for (int s = kforge::v1::JOB_QUEUED; s <= kforge::v1::JOB_CANCELLED; ++s) {
    JobsInState(static_cast<kforge::v1::JobState>(s)).Set(0);
  }
}

prometheus::Gauge& LearnerMetrics::JobsInState(kforge::v1::JobState state) {
  // "JOB_QUEUED" -> "queued".
  std::string name = kforge::v1::JobState_Name(state);
  if (name.rfind("JOB_", 0) == 0) name = name.substr(4);
  return jobs_by_state_.Add({{"state", absl::AsciiStrToLower(name)}});
}

}  // namespace kforge
