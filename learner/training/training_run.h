// One job, from its spec (or its last checkpoint) to its last step: the
// trainer thread's work. Loads the policy (and a frozen reference when the
// KL term is on), restores the newest checkpoint of the job if there is one,
// then runs `warm_start_steps` supervised steps on the task set's reference
// solutions and `total_steps` steps of the job's algorithm:
//
//   GRPO / best-of-N step:
//     1. offer groups (curriculum-drawn tasks x group_size) to the
//        GroupTracker, keeping one step's worth ahead when max_staleness
//        allows, so rollout workers sample while the trainer trains, and
//        with lookahead_steps up to that many steps' worth ahead while the
//        batch is collected too (learner/rollout/offer_window.h);
//     2. wait for prompts_per_step complete groups (scored by verifiers);
//     3. rewards from verdicts (learner/rewards), group-relative advantages
//        or the top-k of each group, the update (PolicyTrainer);
//     4. publish the new weights (version + 1) for GetWeights and broadcast
//        them over NCCL to the workers in the group; report
//        progress (WatchJob, metrics); checkpoint every N steps.
//   SFT step (warm start, ALGORITHM_SFT): reference solutions, formatted as
//     the answer the prompt asks for, trained with the supervised loss.
//
//   absl::Status done = RunTrainingJob(job, deps);
//   // OK: finished; CANCELLED: the user cancelled it; ABORTED: the learner
//   // is stopping (a checkpoint was written, the job stays RUNNING and
//   // resumes at the next start); anything else: the job failed.
#ifndef KFORGE_LEARNER_TRAINING_TRAINING_RUN_H_
#define KFORGE_LEARNER_TRAINING_TRAINING_RUN_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "kforge/v1/job.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "learner/jobs/job_registry.h"
#include "learner/learner_metrics.h"
#include "learner/rollout/group_tracker.h"
#include "learner/weights/weight_broadcaster.h"
#include "learner/weights/weight_publisher.h"

namespace kforge {

struct TrainingRunDeps {
  JobRegistry* jobs = nullptr;
  GroupTracker* groups = nullptr;
  WeightPublisher* weights = nullptr;
  // The NCCL weight broadcast; null: weights go over gRPC only.
  WeightBroadcaster* broadcaster = nullptr;
  LearnerMetrics* metrics = nullptr;
  const v1::LearnerConfig* config = nullptr;
  // True once the learner is shutting down.
  std::function<bool()> stopping;
};

absl::Status RunTrainingJob(const v1::Job& job, const TrainingRunDeps& deps);

}  // namespace kforge

#endif  // KFORGE_LEARNER_TRAINING_TRAINING_RUN_H_
