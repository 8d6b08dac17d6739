// Every metric family the learner exports, declared in one place with the
// kforge_learner_ prefix. Owned by main, shared by the components.
#ifndef KFORGE_LEARNER_LEARNER_METRICS_H_
#define KFORGE_LEARNER_LEARNER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "kforge/v1/job.pb.h"
#include "kforge/v1/learner_service.pb.h"
#include "learner/rollout/group_tracker.h"

namespace kforge {

class LearnerMetrics {
 public:
  explicit LearnerMetrics(prometheus::Registry& registry);

  prometheus::Counter& jobs_submitted;
  prometheus::Counter& jobs_rejected;
  // Jobs in one state, by state label ("queued", "running", ...).
  prometheus::Gauge& JobsInState(kforge::v1::JobState state);
  prometheus::Gauge& workers_registered;
  prometheus::Counter& worker_heartbeats;
  prometheus::Counter& workers_expired;
  // Scored samples delivered, by the status they were acknowledged with.
  prometheus::Counter& SampleAcks(kforge::v1::SampleAck::Status status);
  // Groups and buffer from the tracker's tallies (from one thread).
  void UpdateGroups(const GroupTracker::Stats& stats);

 private:
  prometheus::Family<prometheus::Gauge>& jobs_by_state_;
  prometheus::Family<prometheus::Counter>& sample_acks_;
  prometheus::Family<prometheus::Counter>& groups_;
  prometheus::Gauge& groups_pending_;
  prometheus::Gauge& groups_in_flight_;
  prometheus::Gauge& samples_buffered_;
  GroupTracker::Stats last_groups_;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_LEARNER_METRICS_H_
