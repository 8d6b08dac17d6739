#include "learner/learner_metrics.h"

#include <iterator>
#include <string>

#include "absl/strings/ascii.h"
#include "common/client/learner_delivery.h"
#include "common/metrics/metric_builders.h"

namespace kforge {
namespace {

// The stage label values of kforge_learner_step_stage_seconds, in the order
// ObserveStep reads them from StepTimes.
constexpr const char* kStepStages[] = {"step",        "rollout", "verify",      "train",
                                       "weight_sync", "wait",    "verify_queue"};

const prometheus::Histogram::BucketBoundaries& StageBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800};
  return kBuckets;
}

}  // namespace

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
      weight_streams(NewCounter(registry, "kforge_learner_weight_streams_total",
                                "Whole weight versions streamed to rollout workers (GetWeights).")),
      checkpoints_written(NewCounter(registry, "kforge_learner_checkpoints_written_total",
                                     "Training checkpoints written.")),
      jobs_by_state_(
          NewGaugeFamily(registry, "kforge_learner_jobs", "Jobs known to the learner, by state.")),
      sample_acks_(NewCounterFamily(registry, "kforge_learner_samples_total",
                                    "Scored samples delivered to the learner, by acknowledgement "
                                    "(accepted, duplicate, stale, orphaned, rejected).")),
      groups_(NewCounterFamily(registry, "kforge_learner_groups_total",
                               "Sample groups by event: issued to a worker, completed, re-issued "
                               "after a timeout, a lost worker or a stale sample, dropped.")),
      groups_pending_(NewGauge(registry, "kforge_learner_groups_pending",
                               "Groups waiting for a rollout worker to take them.")),
      groups_in_flight_(NewGauge(registry, "kforge_learner_groups_in_flight",
                                 "Groups issued to rollout workers and not yet complete.")),
      workers_waiting_(NewGauge(registry, "kforge_learner_rollout_workers_waiting",
                                "Rollout workers long-polling TakeWork now: idle for want of "
                                "groups to sample.")),
      samples_buffered_(NewGauge(registry, "kforge_learner_samples_buffered",
                                 "Accepted samples waiting for the trainer.")),
      sample_ledger_(NewGaugeFamily(
          registry, "kforge_learner_sample_ledger",
          "Where accepted samples went, from one snapshot of the group books: accepted == "
          "completed (in a group that completed) + discarded (in a group re-issued or dropped "
          "before it completed) + held (in a group still filling).")),
      group_wait_(NewGauge(registry, "kforge_learner_group_wait_seconds",
                           "How long a group may stay incomplete before it is re-issued: "
                           "group_wait_factor x the recent group times, within "
                           "[group_wait_floor_s, group_timeout_s].")),
      jobs_finished_(NewCounterFamily(registry, "kforge_learner_jobs_finished_total",
                                      "Jobs that ended, by final state.")),
      job_step_(NewGauge(registry, "kforge_learner_job_step", "Steps the running job has taken.")),
      job_total_steps_(NewGauge(registry, "kforge_learner_job_total_steps",
                                "Steps the running job takes in all (warm start included).")),
      policy_version_(NewGauge(registry, "kforge_learner_policy_version",
                               "Version of the newest policy weights (updates so far).")),
      last_step_time_(NewGauge(registry, "kforge_learner_last_step_timestamp_seconds",
                               "Unix time of the running job's last step.")),
      reward_mean_(NewGauge(registry, "kforge_learner_reward_mean",
                            "Mean reward of the last step's samples.")),
      stage_pass_rate_(NewGaugeFamily(registry, "kforge_learner_stage_pass_rate",
                                      "Share of the last step's samples that passed each stage.")),
      correct_rate_(
          NewGaugeFamily(registry, "kforge_learner_correct_rate",
                         "Share of the last step's samples that were correct, by level.")),
      policy_loss_(NewGauge(registry, "kforge_learner_policy_loss", "Loss of the last step.")),
      kl_(NewGauge(registry, "kforge_learner_kl",
                   "Mean k3 KL to the reference per token, last step (0 without a reference).")),
      entropy_(NewGauge(registry, "kforge_learner_entropy",
                        "Mean entropy of the policy per completion token, last step.")),
      grad_norm_(NewGauge(registry, "kforge_learner_grad_norm",
                          "Gradient norm before clipping, last step.")),
      tis_capped_fraction_(NewGauge(
          registry, "kforge_learner_tis_capped_fraction",
          "Share of the last step's completion tokens whose truncated importance weight was cut "
          "to grpo.tis_cap (0 without TIS).")),
      learning_rate_(
          NewGauge(registry, "kforge_learner_learning_rate", "Learning rate, last step.")),
      level2_share_(NewGauge(registry, "kforge_learner_level2_share",
                             "Share of level-2 (and higher) tasks the curriculum draws.")),
      steps_(NewCounter(registry, "kforge_learner_steps_total", "Training steps taken.")),
      samples_trained_(
          NewCounter(registry, "kforge_learner_samples_trained_total", "Sequences trained on.")),
      tokens_trained_(NewCounter(registry, "kforge_learner_tokens_trained_total",
                                 "Completion tokens trained on.")),
      step_duration_(NewHistogram(registry, "kforge_learner_step_duration_seconds",
                                  "Wall time of one training step, waiting for samples included.",
                                  {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800})),
      stage_seconds_(NewHistogramFamily(
          registry, "kforge_learner_step_stage_seconds",
          "Where each step's time went, by stage: step (cadence, end to end), rollout and "
          "verify (wall spans over the step's samples), train (optimiser), weight_sync "
          "(snapshot and broadcast), wait (the learner waiting for scored groups), "
          "verify_queue (a candidate's mean wait from generation to verification). Stages "
          "overlap; see StepTimes in proto/kforge/v1/job.proto.")),
      rollout_tokens_per_second_(NewGauge(
          registry, "kforge_learner_rollout_tokens_per_second",
          "Completion tokens of the last step's samples over their generation span.")),
      verify_candidates_per_second_(NewGauge(
          registry, "kforge_learner_verify_candidates_per_second",
          "Candidates of the last step verified, over their verification span.")),
      train_tokens_per_second_(NewGauge(registry, "kforge_learner_train_tokens_per_second",
                                        "Tokens trained on per second of optimiser time, last "
                                        "step.")),
      wait_share_(NewGauge(registry, "kforge_learner_wait_share",
                           "Share of the last step's wall time the learner waited for scored "
                           "groups.")),
      speedup_(NewHistogram(registry, "kforge_learner_speedup",
                            "Speedup over eager PyTorch of correct, timed samples.",
                            {0.1, 0.25, 0.5, 0.8, 1, 1.25, 1.5, 2, 3, 5, 10})),
      staleness_(NewHistogram(registry, "kforge_learner_sample_staleness_versions",
                              "Policy versions between a trained sample's policy and the "
                              "trainer's.",
                              {0, 1, 2, 4, 8, 16})),
      weight_publish_(NewHistogram(registry, "kforge_learner_weight_publish_seconds",
                                   "Time to snapshot new weights for the rollout workers.",
                                   {0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30})),
      broadcasts_(NewCounterFamily(registry, "kforge_learner_weight_broadcasts_total",
                                   "NCCL weight broadcasts to the rollout workers' group, by "
                                   "result (ok, failed: aborted after an error or its timeout).")),
      broadcast_seconds_(NewHistogram(registry, "kforge_learner_weight_broadcast_seconds",
                                      "Time of one NCCL weight broadcast, from its announcement "
                                      "to its completion on the learner.",
                                      {0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 5, 30})),
      broadcast_bytes_(NewCounter(registry, "kforge_learner_weight_broadcast_bytes_total",
                                  "Bytes of weights sent by completed NCCL broadcasts.")),
      group_forms_(
          NewCounterFamily(registry, "kforge_learner_broadcast_group_forms_total",
                           "Attempts to (re-)form the weight-broadcast group, by result.")),
      group_members_(NewGauge(registry, "kforge_learner_broadcast_group_members",
                              "Rollout workers in the weight-broadcast group.")),
      group_generation_(NewGauge(registry, "kforge_learner_broadcast_group_generation",
                                 "Generation of the weight-broadcast group (one more each time "
                                 "it re-forms).")),
      turn_reward_mean_(NewGaugeFamily(registry, "kforge_learner_turn_reward_mean",
                                       "Multi-turn jobs: mean reward of the last step's samples "
                                       "at each turn (turn 0: the first answer).")),
      solved_by_turn_(NewGaugeFamily(registry, "kforge_learner_solved_by_turn",
                                     "Multi-turn jobs: share of the last step's trajectories "
                                     "solved (correct, no hack flag) by each turn.")),
      turns_per_trajectory_(NewHistogram(registry, "kforge_learner_turns_per_trajectory",
                                         "Multi-turn jobs: turns each trajectory took.",
                                         {1, 2, 3, 4, 5, 6, 7, 8})),
      eval_step_(NewGauge(registry, "kforge_learner_eval_step",
                          "Step of the running job's last held-out evaluation.")),
      eval_correct_rate_(
          NewGaugeFamily(registry, "kforge_learner_eval_correct_rate",
                         "Correct rate on the held-out tasks at the last evaluation, by "
                         "level (\"all\": every level).")) {
  for (int s = kforge::v1::JOB_SUCCEEDED; s <= kforge::v1::JOB_CANCELLED; ++s) {
    JobsFinished(static_cast<kforge::v1::JobState>(s));
  }
  for (int s = kforge::v1::JOB_QUEUED; s <= kforge::v1::JOB_CANCELLED; ++s) {
    JobsInState(static_cast<kforge::v1::JobState>(s)).Set(0);
  }
  for (int s = kforge::v1::SampleAck::ACCEPTED; s <= kforge::v1::SampleAck::REJECTED; ++s) {
    SampleAcks(static_cast<kforge::v1::SampleAck::Status>(s));
  }
  UpdateGroups({});
  for (const char* stage : kStepStages) stage_seconds_.Add({{"stage", stage}}, StageBuckets());
  // Zero series exist from the start, so rate() and alerts see them.
  for (const char* result : {"ok", "failed"}) {
    broadcasts_.Add({{"result", result}});
    group_forms_.Add({{"result", result}});
  }
}

prometheus::Counter& LearnerMetrics::SampleAcks(kforge::v1::SampleAck::Status status) {
  return sample_acks_.Add(
      {{"status", AckLabel(status)}});
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
  workers_waiting_.Set(static_cast<double>(stats.takers));
  samples_buffered_.Set(static_cast<double>(stats.samples_buffered));
  sample_ledger_.Add({{"entry", "accepted"}}).Set(static_cast<double>(stats.accepted));
  sample_ledger_.Add({{"entry", "completed"}}).Set(static_cast<double>(stats.samples_completed));
  sample_ledger_.Add({{"entry", "discarded"}}).Set(static_cast<double>(stats.samples_discarded));
  sample_ledger_.Add({{"entry", "held"}}).Set(static_cast<double>(stats.samples_held));
  group_wait_.Set(absl::ToDoubleSeconds(stats.group_wait));
  last_groups_ = stats;
}

prometheus::Counter& LearnerMetrics::JobsFinished(kforge::v1::JobState state) {
  std::string name = kforge::v1::JobState_Name(state);
  if (name.rfind("JOB_", 0) == 0) name = name.substr(4);
  return jobs_finished_.Add({{"state", absl::AsciiStrToLower(name)}});
}

void LearnerMetrics::ObserveStep(const kforge::v1::JobProgress& p, const StepFigures& f) {
  job_step_.Set(static_cast<double>(p.step()));
  job_total_steps_.Set(static_cast<double>(p.total_steps()));
  policy_version_.Set(static_cast<double>(p.policy_version()));
  last_step_time_.SetToCurrentTime();
  reward_mean_.Set(p.mean_reward());
  const std::pair<const char*, double> stages[] = {
      {"static", p.pass_rates().static_pass()},   {"compile", p.pass_rates().compile_pass()},
      {"tiny_run", p.pass_rates().tiny_run_pass()}, {"multi_input", p.pass_rates().multi_input_pass()},
      {"correct", p.pass_rates().correct()}};
  for (const auto& [stage, rate] : stages) stage_pass_rate_.Add({{"stage", stage}}).Set(rate);
  for (const auto& [level, rate] : p.correct_by_level()) {
    correct_rate_.Add({{"level", std::to_string(level)}}).Set(rate);
  }
  policy_loss_.Set(p.policy_loss());
  kl_.Set(p.kl());
  entropy_.Set(p.entropy());
  grad_norm_.Set(p.grad_norm());
  tis_capped_fraction_.Set(p.tis_capped_fraction());
  learning_rate_.Set(f.learning_rate);
  level2_share_.Set(p.level2_share());
  steps_.Increment();
  samples_trained_.Increment(static_cast<double>(f.samples));
  tokens_trained_.Increment(static_cast<double>(f.tokens));
  step_duration_.Observe(f.step_seconds);
  const kforge::v1::StepTimes& t = p.times();
  const double seconds[] = {t.step_seconds(),        t.rollout_seconds(),
                            t.verify_seconds(),      t.train_seconds(),
                            t.weight_sync_seconds(), t.learner_wait_seconds(),
                            t.verify_queue_mean_seconds()};
  static_assert(std::size(seconds) == std::size(kStepStages));
  for (size_t i = 0; i < std::size(kStepStages); ++i) {
    stage_seconds_.Add({{"stage", kStepStages[i]}}, StageBuckets()).Observe(seconds[i]);
  }
  rollout_tokens_per_second_.Set(t.rollout_tokens_per_second());
  verify_candidates_per_second_.Set(t.verify_candidates_per_second());
  train_tokens_per_second_.Set(t.train_tokens_per_second());
  wait_share_.Set(t.step_seconds() > 0 ? t.learner_wait_seconds() / t.step_seconds() : 0);
  for (double s : f.speedups) speedup_.Observe(s);
  for (int64_t s : f.staleness) staleness_.Observe(static_cast<double>(s));
  // Per-turn series appear with the first multi-turn step: a single-turn
  // job has no turn to label.
  for (int k = 0; k < p.solved_by_turn_size(); ++k) {
    solved_by_turn_.Add({{"turn", std::to_string(k)}}).Set(p.solved_by_turn(k));
  }
  for (int k = 0; k < p.reward_by_turn_size(); ++k) {
    turn_reward_mean_.Add({{"turn", std::to_string(k)}}).Set(p.reward_by_turn(k));
  }
  for (int32_t turns : f.trajectory_turns) turns_per_trajectory_.Observe(turns);
}

void LearnerMetrics::ObserveEval(const kforge::v1::EvalReport& report) {
  eval_step_.Set(static_cast<double>(report.step()));
  eval_correct_rate_.Add({{"level", "all"}}).Set(report.overall().correct_rate());
  for (const kforge::v1::LevelEval& level : report.levels()) {
    eval_correct_rate_.Add({{"level", std::to_string(level.level())}}).Set(level.correct_rate());
  }
}

void LearnerMetrics::ObserveWeightPublish(double seconds) {
  weight_publish_.Observe(seconds);
}

void LearnerMetrics::ObserveBroadcast(bool ok, double seconds, int64_t bytes) {
  broadcasts_.Add({{"result", ok ? "ok" : "failed"}}).Increment();
  if (!ok) return;
  broadcast_seconds_.Observe(seconds);
  broadcast_bytes_.Increment(static_cast<double>(bytes));
}

void LearnerMetrics::ObserveBroadcastGroup(int members, int64_t generation) {
  if (members != 0) group_forms_.Add({{"result", members > 0 ? "ok" : "failed"}}).Increment();
  group_members_.Set(members > 0 ? members : 0);
  group_generation_.Set(static_cast<double>(generation));
}

prometheus::Gauge& LearnerMetrics::JobsInState(kforge::v1::JobState state) {
  // "JOB_QUEUED" -> "queued".
  std::string name = kforge::v1::JobState_Name(state);
  if (name.rfind("JOB_", 0) == 0) name = name.substr(4);
  return jobs_by_state_.Add({{"state", absl::AsciiStrToLower(name)}});
}

}  // namespace kforge
