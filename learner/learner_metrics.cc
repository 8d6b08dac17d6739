#include "learner/learner_metrics.h"

#include <string>

#include "absl/strings/ascii.h"
#include "common/metrics/metric_builders.h"

namespace kforge {
LearnerMetrics::LearnerMetrics(prometheus::Registry& registry)
    : jobs_submitted(NewCounter(registry, "kforge_learner_jobs_submitted_total",
                             "Jobs accepted by SubmitJob.")),
      jobs_rejected(NewCounter(registry, "kforge_learner_jobs_rejected_total",
                            "SubmitJob calls refused because the spec was invalid or the queue "
                            "was full.")),
      workers_registered(NewGauge(registry, "kforge_learner_workers",
                               "Rollout workers currently registered and alive.")),
      worker_heartbeats(NewCounter(registry, "kforge_learner_worker_heartbeats_total",
                                "Heartbeats received from rollout workers.")),
      workers_expired(NewCounter(registry, "kforge_learner_workers_expired_total",
                              "Rollout workers dropped after missing heartbeats.")),
      jobs_by_state_(prometheus::BuildGauge()
                         .Name("kforge_learner_jobs")
                         .Help("Jobs known to the learner, by state.")
                         .Register(registry)),
      sample_acks_(prometheus::BuildCounter()
                       .Name("kforge_learner_samples_total")
                       .Help("Scored samples delivered to the learner, by acknowledgement "
                             "(accepted, duplicate, stale, orphaned, rejected).")
                       .Register(registry)),
      groups_(prometheus::BuildCounter()
                  .Name("kforge_learner_groups_total")
                  .Help("Sample groups by event: issued to a worker, completed, re-issued "
                        "after a timeout, a lost worker or a stale sample, dropped.")
                  .Register(registry)),
      groups_pending_(NewGauge(registry, "kforge_learner_groups_pending",
                            "Groups waiting for a rollout worker to take them.")),
      groups_in_flight_(NewGauge(registry, "kforge_learner_groups_in_flight",
                              "Groups issued to rollout workers and not yet complete.")),
      samples_buffered_(NewGauge(registry, "kforge_learner_samples_buffered",
                              "Accepted samples waiting for the trainer.")) {
  for (int s = kforge::v1::JOB_QUEUED; s <= kforge::v1::JOB_CANCELLED; ++s) {
    JobsInState(static_cast<kforge::v1::JobState>(s)).Set(0);
  }
  for (int s = kforge::v1::SampleAck::ACCEPTED; s <= kforge::v1::SampleAck::REJECTED; ++s) {
    SampleAcks(static_cast<kforge::v1::SampleAck::Status>(s));
  }
  UpdateGroups({});
}

prometheus::Counter& LearnerMetrics::SampleAcks(kforge::v1::SampleAck::Status status) {
  return sample_acks_.Add(
      {{"status", absl::AsciiStrToLower(kforge::v1::SampleAck::Status_Name(status))}});
}

void LearnerMetrics::UpdateGroups(const GroupTracker::Stats& stats) {
  const std::pair<const char*, std::pair<uint64_t, uint64_t>> events[] = {
      {"issued", {stats.groups_issued, last_groups_.groups_issued}},
      {"completed", {stats.groups_completed, last_groups_.groups_completed}},
      {"reissued", {stats.groups_reissued, last_groups_.groups_reissued}},
      {"dropped", {stats.groups_dropped, last_groups_.groups_dropped}}};
  for (const auto& [event, counts] : events) {
    IncrementToward(groups_.Add({{"event", event}}), counts.first, counts.second);
  }
  groups_pending_.Set(static_cast<double>(stats.groups_pending));
  groups_in_flight_.Set(static_cast<double>(stats.groups_in_flight));
  samples_buffered_.Set(static_cast<double>(stats.samples_buffered));
  last_groups_ = stats;
}

prometheus::Gauge& LearnerMetrics::JobsInState(kforge::v1::JobState state) {
  // "JOB_QUEUED" -> "queued".
  std::string name = kforge::v1::JobState_Name(state);
  if (name.rfind("JOB_", 0) == 0) name = name.substr(4);
  return jobs_by_state_.Add({{"state", absl::AsciiStrToLower(name)}});
}

}  // namespace kforge
