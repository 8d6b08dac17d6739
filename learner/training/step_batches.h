// Turning what a step gathered into training sequences and figures:
//  * supervised sequences from reference solutions (SFT warm start), the
//    solution written as the answer the job's prompt asks for;
//  * GRPO sequences from scored groups: group-relative advantages of the
//    rewards, per token (with hierarchical rewards, reasoning tokens get the
//    advantage of the reasoning reward and code tokens that of the code
//    reward); groups without reward variance are skipped when the job says;
//  * best-of-N sequences: the top_k samples of each group whose reward
//    exceeds the threshold, trained on with the supervised loss;
//  * multi-turn groups (WorkItem.multi_turn.max_turns > 1): GRPO trains one
//    sequence per turn, with turn-level advantages (discounted returns
//    against the job's per-turn baseline, learner/rewards/turn_credit.h);
//    best-of-N takes each trajectory's best turn as its candidate;
//  * the step's figures for JobProgress and the metrics.
//
//   std::vector<ScoredGroup> groups = ScoreGroups(std::move(completed), spec);
//   std::vector<TrainSequence> batch = GrpoSequences(groups, spec.grpo(), hierarchical, *tok, &skipped);
#ifndef KFORGE_LEARNER_TRAINING_STEP_BATCHES_H_
#define KFORGE_LEARNER_TRAINING_STEP_BATCHES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/job.pb.h"
#include "kforge/v1/learner_service.pb.h"
#include "kforge/v1/sample.pb.h"
#include "learner/learner_metrics.h"
#include "learner/rewards/reward.h"
#include "learner/rollout/group_tracker.h"
#include "learner/training/completion_logprobs.h"

namespace kforge {

class BpeTokenizer;

// A complete group with the reward of each of its samples.
struct ScoredGroup {
  v1::WorkItem item;
  std::vector<v1::ScoredSample> samples;
  std::vector<RewardBreakdown> rewards;  // parallel to samples
};

// Rewards for every sample of every group, with the job's reward spec.
std::vector<ScoredGroup> ScoreGroups(std::vector<CompletedGroup> completed,
                                     const v1::JobSpec& spec);

// The reference solution as the completion the prompt asks for.
std::string ReferenceAnswer(const std::string& solution, bool reasoning_tags);

// `count` supervised sequences cycling through the tasks with a reference
// solution, starting at `offset` (so a resumed job continues the cycle).
// A `follow_up_share` of them (drawn by their place in the cycle) are
// revision turns: the follow-up prompt a
// multi-turn trajectory's second turn reads, after an earlier wrong answer
// and the feedback on it (SftParams.follow_up_share), with the task's
// solution as the completion. The wrong answer is, in even shares, no
// code at all (reasoning only), another task's solution (the tiny run
// fails; with one solved task, the next kind instead) or this task's own
// cut short (the static check fails those two).
// FAILED_PRECONDITION when no task has one.
absl::StatusOr<std::vector<TrainSequence>> SupervisedSequences(
    const std::vector<v1::Task>& tasks, const v1::PromptTemplate& prompt,
    const BpeTokenizer& tokenizer, int32_t eos, int64_t offset, int64_t count,
    double follow_up_share = 0, int32_t feedback_max_chars = 1500);

struct GroupSelection {
  int64_t skipped_groups = 0;   // no reward variance, or nothing above the threshold
  int64_t unusable_samples = 0;  // verifier faults: left out
};

std::vector<TrainSequence> GrpoSequences(const std::vector<ScoredGroup>& groups,
                                         const v1::GrpoParams& grpo, bool hierarchical,
                                         const BpeTokenizer& tokenizer, GroupSelection* selection);

std::vector<TrainSequence> BestOfNSequences(const std::vector<ScoredGroup>& groups,
                                            const v1::BestOfNParams& params,
                                            GroupSelection* selection);

// Reward, pass rates per stage and level, speedups and staleness of the
// step's samples (every turn of a multi-turn trajectory counts as a sample)
// into `progress` and `figures`, and for multi-turn groups the share of
// trajectories solved by each turn, the mean reward of each turn and the
// turns a trajectory took (JobProgress.solved_by_turn, reward_by_turn,
// turns_per_trajectory; StepFigures.trajectory_turns).
void SummariseStep(const std::vector<ScoredGroup>& groups, int64_t policy_version,
                   v1::JobProgress* progress, LearnerMetrics::StepFigures* figures);

}  // namespace kforge

#endif  // KFORGE_LEARNER_TRAINING_STEP_BATCHES_H_
