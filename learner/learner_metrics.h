// Every metric family the learner exports, declared in one place with the
// kforge_learner_ prefix. Owned by main, shared by the components.
#ifndef KFORGE_LEARNER_LEARNER_METRICS_H_
#define KFORGE_LEARNER_LEARNER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <vector>

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

  prometheus::Counter& weight_streams;
  prometheus::Counter& checkpoints_written;
  // Jobs that ended, by final state ("succeeded", "failed", "cancelled").
  prometheus::Counter& JobsFinished(kforge::v1::JobState state);

  // What one optimiser step of the running job measured (trainer thread).
  struct StepFigures {
    double learning_rate = 0;
    double step_seconds = 0;
    int64_t samples = 0;
    int64_t tokens = 0;
    std::vector<double> speedups;     // of correct, timed samples
    std::vector<int64_t> staleness;   // policy versions behind, per trained sample
    // Multi-turn jobs: the turns each of the step's trajectories took.
    std::vector<int32_t> trajectory_turns;
  };
  // Also records where the step's time went (progress.times).
  void ObserveStep(const kforge::v1::JobProgress& progress, const StepFigures& figures);
  void ObserveWeightPublish(double seconds);
  // One NCCL weight broadcast (WeightBroadcaster): whether it completed,
  // how long it took, and the bytes it sent.
  void ObserveBroadcast(bool ok, double seconds, int64_t bytes);
  // The weight-broadcast group (re-)formed with `members` workers, or
  // failed to (members < 0), or ended (0).
  void ObserveBroadcastGroup(int members, int64_t generation);
  // A held-out evaluation of the running job.
  void ObserveEval(const kforge::v1::EvalReport& report);

 private:
  prometheus::Family<prometheus::Gauge>& jobs_by_state_;
  prometheus::Family<prometheus::Counter>& sample_acks_;
  prometheus::Family<prometheus::Counter>& groups_;
  prometheus::Gauge& groups_pending_;
  prometheus::Gauge& groups_in_flight_;
  prometheus::Gauge& workers_waiting_;
  prometheus::Gauge& samples_buffered_;
  prometheus::Family<prometheus::Gauge>& sample_ledger_;
  prometheus::Gauge& group_wait_;
  GroupTracker::Stats last_groups_;
  prometheus::Family<prometheus::Counter>& jobs_finished_;
  prometheus::Gauge& job_step_;
  prometheus::Gauge& job_total_steps_;
  prometheus::Gauge& policy_version_;
  prometheus::Gauge& last_step_time_;
  prometheus::Gauge& reward_mean_;
  prometheus::Family<prometheus::Gauge>& stage_pass_rate_;
  prometheus::Family<prometheus::Gauge>& correct_rate_;
  prometheus::Gauge& policy_loss_;
  prometheus::Gauge& kl_;
  prometheus::Gauge& entropy_;
  prometheus::Gauge& grad_norm_;
  prometheus::Gauge& tis_capped_fraction_;
  prometheus::Gauge& learning_rate_;
  prometheus::Gauge& level2_share_;
  prometheus::Counter& steps_;
  prometheus::Counter& samples_trained_;
  prometheus::Counter& tokens_trained_;
  prometheus::Histogram& step_duration_;
  prometheus::Family<prometheus::Histogram>& stage_seconds_;
  prometheus::Gauge& rollout_tokens_per_second_;
  prometheus::Gauge& verify_candidates_per_second_;
  prometheus::Gauge& train_tokens_per_second_;
  prometheus::Gauge& wait_share_;
  prometheus::Histogram& speedup_;
  prometheus::Histogram& staleness_;
  prometheus::Histogram& weight_publish_;
  prometheus::Family<prometheus::Counter>& broadcasts_;
  prometheus::Histogram& broadcast_seconds_;
  prometheus::Counter& broadcast_bytes_;
  prometheus::Family<prometheus::Counter>& group_forms_;
  prometheus::Gauge& group_members_;
  prometheus::Gauge& group_generation_;
  // Multi-turn jobs, by `turn` label (0 for the first answer).
  prometheus::Family<prometheus::Gauge>& turn_reward_mean_;
  prometheus::Family<prometheus::Gauge>& solved_by_turn_;
  prometheus::Histogram& turns_per_trajectory_;
  prometheus::Gauge& eval_step_;
  prometheus::Family<prometheus::Gauge>& eval_correct_rate_;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_LEARNER_METRICS_H_
