// PolicyTrainer: one job step of policy optimisation over a batch of
// sequences: GRPO's clipped policy gradient (with an optional KL to a frozen
// reference) or a supervised loss (SFT warm start, best-of-N), with
// mini-batches, micro-batches and gradient accumulation, gradient clipping
// and AdamW on the scheduled learning rate.
//
//   KF_ASSIGN_OR_RETURN(auto trainer, PolicyTrainer::Create(policy.get(), nullptr, options));
//   KF_ASSIGN_OR_RETURN(TrainStepStats stats,
//                       trainer->Step(sequences, {.objective = Objective::kGrpo, ...}));
//
// A job step splits its sequences into mini-batches of optimizer.batch_size
// (one optimiser update each) and those into micro-batches of
// optimizer.micro_batch_size (one forward/backward each); every loss is
// normalised by the counted tokens of its mini-batch, so accumulation over
// micro-batches equals one big batch. `epochs` repeats the pass; the
// importance ratios then use the behaviour log-probabilities throughout, as
// PPO does. With recompute_old_logprobs the ratios are taken against the
// learner's own log-probs of the step's starting weights, and the rollout
// worker's are kept for the truncated importance weight (GrpoParams.tis_cap,
// policy_loss.h) that corrects for the policy that really drew the tokens.
// The learning rate depends on the job step (step()), so a step
// with several updates uses one rate.
//
// An update whose gradient norm is not finite is skipped (counted in the
// stats), leaving the weights as they were.
//
// Threading: one owner thread; the model must not be read elsewhere while a
// step runs.
#ifndef KFORGE_LEARNER_TRAINING_POLICY_TRAINER_H_
#define KFORGE_LEARNER_TRAINING_POLICY_TRAINER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kforge/v1/job.pb.h"
#include "learner/training/adamw.h"
#include "learner/training/completion_logprobs.h"
#include "learner/training/policy_loss.h"

namespace kforge {

class DecoderModel;

enum class Objective { kGrpo, kSupervised };

struct TrainStepParams {
  Objective objective = Objective::kGrpo;
  GrpoLossParams grpo;
  int32_t epochs = 1;
  bool recompute_old_logprobs = false;
  // Scales the scheduled learning rate (supervised warm-start steps run at
  // their own peak: SftParams.learning_rate / OptimizerParams.learning_rate).
  double learning_rate_scale = 1.0;
};

struct TrainStepStats {
  double loss = 0;          // mean over the step's updates
  double kl = 0;            // mean k3 per counted token
  double entropy = 0;       // mean -log p(token): the sampled-token entropy estimate
  double grad_norm = 0;     // mean pre-clip norm over the updates
  double learning_rate = 0;
  double clip_fraction = 0;  // share of tokens whose ratio left the clip range
  double tis_capped_fraction = 0;  // share of tokens whose TIS weight was cut to the cap
  double mean_ratio = 0;
  int64_t tokens = 0;        // completion tokens in the batch
  // Positions the forward passes ran: prompt + completion of every sequence
  // (over every epoch), and the same with each micro-batch padded to its
  // longest sequence. Their gap is compute spent on padding.
  int64_t sequence_tokens = 0;
  int64_t padded_tokens = 0;
  int64_t sequences = 0;
  int32_t updates = 0;
  int32_t skipped_updates = 0;  // non-finite gradients
};

struct PolicyTrainerOptions {
  v1::OptimizerParams optimizer;  // defaults applied
  LearningRateSchedule schedule;
  // Sampling temperature of the rollouts (their log-probabilities are of
  // logits / temperature); 1 for supervised-only jobs.
  double temperature = 1.0;
  // AdamWParams.fused: the fused CUDA kernel where there is one (off only
  // to compare against the multi-tensor passes).
  bool fused_optimizer = true;
};

class PolicyTrainer {
 public:
  // `policy` (trained in place) and `reference` (frozen; may be null when no
  // KL term is used) outlive the trainer.
  static absl::StatusOr<std::unique_ptr<PolicyTrainer>> Create(DecoderModel* policy,
                                                               const DecoderModel* reference,
                                                               const PolicyTrainerOptions& options);

  // INVALID_ARGUMENT for an empty batch or sequences whose per-token fields
  // do not match their completion length.
  absl::StatusOr<TrainStepStats> Step(absl::Span<const TrainSequence> batch,
                                      const TrainStepParams& params);

  AdamW& optimizer() { return optimizer_; }
  // Job steps taken; restored on resume.
  int64_t step() const { return step_; }
  void set_step(int64_t step) { step_ = step; }
  // Moves the learning-rate schedule's last step: a warm start that ended
  // early (SftParams.stop_below_loss) shortens the job, and the decay still
  // ends with it.
  void set_schedule_total_steps(int64_t total) { options_.schedule.total_steps = total; }

 private:
  PolicyTrainer(DecoderModel* policy, const DecoderModel* reference,
                const PolicyTrainerOptions& options);
  // Forward/backward of one micro-batch; adds to `stats`.
  absl::Status Accumulate(absl::Span<const TrainSequence* const> micro,
                          const TrainStepParams& params, double normaliser,
                          at::Tensor* device_sums);
  absl::Status RecomputeOldLogprobs(std::vector<TrainSequence>& batch);

  DecoderModel* const policy_;
  const DecoderModel* const reference_;
  PolicyTrainerOptions options_;  // the schedule's end moves (set_schedule_total_steps)
  AdamW optimizer_;
  int64_t step_ = 0;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_TRAINING_POLICY_TRAINER_H_
