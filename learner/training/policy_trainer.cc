#include "learner/training/policy_trainer.h"

#include <algorithm>
#include <cmath>

#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/torch_status.h"

namespace kforge {
namespace {

std::vector<const TrainSequence*> Pointers(absl::Span<const TrainSequence> batch, size_t begin,
                                           size_t end) {
  std::vector<const TrainSequence*> out;
  for (size_t i = begin; i < end; ++i) out.push_back(&batch[i]);
  return out;
}

// Positions a forward pass runs for `s`: its prompt and completion.
size_t Positions(const TrainSequence& s) { return s.prompt.size() + s.completion.size(); }

// The sequences of batch[begin, end) in micro-batches of `micro`, taken in
// order of length (prompt + completion; stable, so runs repeat): a
// micro-batch is padded to its longest sequence, and neighbours in length
// waste the least. The sum over micro-batches, and so the gradient, is the
// same in any order.
std::vector<std::vector<const TrainSequence*>> MicroBatchesByLength(
    absl::Span<const TrainSequence> batch, size_t begin, size_t end, size_t micro) {
  std::vector<const TrainSequence*> order = Pointers(batch, begin, end);
  std::stable_sort(order.begin(), order.end(), [](const TrainSequence* a, const TrainSequence* b) {
    return Positions(*a) < Positions(*b);
  });
  std::vector<std::vector<const TrainSequence*>> out;
  for (size_t m = 0; m < order.size(); m += micro) {
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(m),
                     order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), m + micro)));
  }
  return out;
}

double CountedTokens(absl::Span<const TrainSequence> batch, size_t begin, size_t end) {
  double tokens = 0;
  for (size_t i = begin; i < end; ++i) tokens += static_cast<double>(batch[i].completion.size());
  return tokens;
}

absl::Status CheckBatch(absl::Span<const TrainSequence> batch, Objective objective) {
  if (batch.empty()) return absl::InvalidArgumentError("train step: empty batch");
  for (size_t i = 0; i < batch.size(); ++i) {
    const TrainSequence& s = batch[i];
    if (s.prompt.empty() || s.completion.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("train step: sequence ", i, " has an empty prompt or completion"));
    }
    if (objective == Objective::kGrpo && (s.old_logprobs.size() != s.completion.size() ||
                                          s.advantages.size() != s.completion.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "train step: sequence ", i, " has ", s.completion.size(), " completion tokens but ",
          s.old_logprobs.size(), " log-probabilities and ", s.advantages.size(), " advantages"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PolicyTrainer>> PolicyTrainer::Create(
    DecoderModel* policy, const DecoderModel* reference, const PolicyTrainerOptions& options) {
  if (policy == nullptr) return absl::InvalidArgumentError("trainer: no policy model");
  if (options.optimizer.batch_size() < 1 || options.optimizer.micro_batch_size() < 1) {
    return absl::InvalidArgumentError("trainer: batch sizes must be at least 1");
  }
  return TorchCall("trainer set-up", [&] {
    return std::unique_ptr<PolicyTrainer>(new PolicyTrainer(policy, reference, options));
  });
}

PolicyTrainer::PolicyTrainer(DecoderModel* policy, const DecoderModel* reference,
                             const PolicyTrainerOptions& options)
    : policy_(policy),
      reference_(reference),
      options_(options),
      optimizer_(policy->NamedParameters(), {.beta1 = options.optimizer.beta1(),
                                             .beta2 = options.optimizer.beta2(),
                                             .eps = options.optimizer.eps(),
                                             .weight_decay = options.optimizer.weight_decay(),
                                             .fused = options.fused_optimizer}) {}

absl::Status PolicyTrainer::RecomputeOldLogprobs(std::vector<TrainSequence>& batch) {
  // The micro-batches the step's first pass will run, so that pass scores
  // each sequence with the same padding, and its ratio starts at 1.
  const size_t mini = static_cast<size_t>(options_.optimizer.batch_size());
  const size_t micro = static_cast<size_t>(options_.optimizer.micro_batch_size());
  for (size_t begin = 0; begin < batch.size(); begin += mini) {
    const size_t end = std::min(batch.size(), begin + mini);
    for (const std::vector<const TrainSequence*>& seqs :
         MicroBatchesByLength(batch, begin, end, micro)) {
      c10::NoGradGuard no_grad;
      KF_ASSIGN_OR_RETURN(CompletionLogprobs lp,
                          ComputeCompletionLogprobs(*policy_, seqs, options_.temperature));
      const at::Tensor host = lp.logprobs.to(at::kCPU).contiguous();
      auto rows = host.accessor<float, 2>();
      for (size_t row = 0; row < seqs.size(); ++row) {
        TrainSequence& s = batch[static_cast<size_t>(seqs[row] - batch.data())];
        s.sampler_logprobs = s.old_logprobs;  // what the rollout worker drew with
        for (size_t j = 0; j < s.completion.size(); ++j) {
          s.old_logprobs[j] = rows[static_cast<int64_t>(row)][static_cast<int64_t>(j)];
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status PolicyTrainer::Accumulate(absl::Span<const TrainSequence* const> micro,
                                       const TrainStepParams& params, double normaliser,
                                       at::Tensor* device_sums) {
  const double temperature = params.objective == Objective::kGrpo ? options_.temperature : 1.0;
  KF_ASSIGN_OR_RETURN(CompletionLogprobs lp,
                      ComputeCompletionLogprobs(*policy_, micro, temperature));
  const at::Device device = policy_->options().device;
  PolicyLossInputs inputs{.logprobs = lp.logprobs, .mask = lp.mask};
  if (params.objective == Objective::kGrpo) {
    inputs.old_logprobs = PackPerToken(micro, &TrainSequence::old_logprobs, device);
    inputs.advantages = PackPerToken(micro, &TrainSequence::advantages, device);
    // Sampler log-probs exist only where the old ones were recomputed.
    if (params.grpo.tis_cap > 0 && !micro.front()->sampler_logprobs.empty()) {
      inputs.sampler_logprobs = PackPerToken(micro, &TrainSequence::sampler_logprobs, device);
    }
    if (params.grpo.kl_coef > 0 && reference_ != nullptr) {
      c10::NoGradGuard no_grad;
      KF_ASSIGN_OR_RETURN(CompletionLogprobs ref,
                          ComputeCompletionLogprobs(*reference_, micro, temperature));
      inputs.ref_logprobs = ref.logprobs.detach();
    }
  }
  return TorchCall("policy loss backward", [&]() -> absl::Status {
    const PolicyLoss loss = params.objective == Objective::kGrpo
                                ? GrpoLoss(inputs, params.grpo, normaliser)
                                : SupervisedLoss(inputs, normaliser);
    loss.loss.backward();
    // [loss, pg, kl, clipped, ratio, tokens, tis capped, entropy], summed
    // on the device.
    const at::Tensor sums = at::cat({loss.loss.detach().reshape({1}), loss.sums,
                                     lp.entropy_sum.reshape({1})});
    *device_sums = device_sums->defined() ? *device_sums + sums : sums;
    return absl::OkStatus();
  });
}

absl::StatusOr<TrainStepStats> PolicyTrainer::Step(absl::Span<const TrainSequence> raw_batch,
                                                   const TrainStepParams& params) {
  KF_RETURN_IF_ERROR(CheckBatch(raw_batch, params.objective));
  std::vector<TrainSequence> owned;
  absl::Span<const TrainSequence> batch = raw_batch;
  if (params.objective == Objective::kGrpo && params.recompute_old_logprobs) {
    owned.assign(raw_batch.begin(), raw_batch.end());
    KF_RETURN_IF_ERROR(RecomputeOldLogprobs(owned));
    batch = owned;
  }
  TrainStepStats stats;
  stats.sequences = static_cast<int64_t>(batch.size());
  stats.learning_rate = LearningRate(options_.schedule, step_) * params.learning_rate_scale;
  const size_t mini = static_cast<size_t>(options_.optimizer.batch_size());
  const size_t micro = static_cast<size_t>(options_.optimizer.micro_batch_size());
  double counted = 0;
  at::Tensor sums;  // see Accumulate
  for (int32_t epoch = 0; epoch < std::max(1, params.epochs); ++epoch) {
    for (size_t begin = 0; begin < batch.size(); begin += mini) {
      const size_t end = std::min(batch.size(), begin + mini);
      const double normaliser = CountedTokens(batch, begin, end);
      counted += normaliser;
      optimizer_.ZeroGrad();
      for (const std::vector<const TrainSequence*>& seqs :
           MicroBatchesByLength(batch, begin, end, micro)) {
        size_t longest = 0;
        for (const TrainSequence* s : seqs) {
          longest = std::max(longest, Positions(*s));
          stats.sequence_tokens += static_cast<int64_t>(Positions(*s));
        }
        stats.padded_tokens += static_cast<int64_t>(longest * seqs.size());
        KF_RETURN_IF_ERROR(Accumulate(seqs, params, normaliser, &sums));
      }
      KF_ASSIGN_OR_RETURN(const double norm, TorchCall("gradient clipping", [&] {
                            return optimizer_.ClipGradNorm(options_.optimizer.max_grad_norm());
                          }));
      ++stats.updates;
      if (!std::isfinite(norm)) {
        ++stats.skipped_updates;
        continue;
      }
      stats.grad_norm += norm;
      KF_RETURN_IF_ERROR(TorchCall("optimizer step", [&] {
        optimizer_.Step(stats.learning_rate);
        return absl::OkStatus();
      }));
    }
  }
  KF_RETURN_IF_ERROR(TorchCall("step figures", [&] {
    const at::Tensor host = sums.to(at::kCPU, at::kDouble);
    const double* v = host.data_ptr<double>();
    stats.loss = v[0];
    stats.kl = v[2];
    stats.clip_fraction = v[3];
    stats.mean_ratio = v[4];
    stats.tis_capped_fraction = v[6];
    stats.entropy = v[7];
    return absl::OkStatus();
  }));
  stats.tokens = static_cast<int64_t>(CountedTokens(batch, 0, batch.size()));
  const double applied = std::max(1, stats.updates - stats.skipped_updates);
  stats.loss /= std::max(1, stats.updates);
  stats.grad_norm /= applied;
  if (counted > 0) {
    stats.kl /= counted;
    stats.entropy /= counted;
    stats.clip_fraction /= counted;
    stats.tis_capped_fraction /= counted;
    stats.mean_ratio /= counted;
  }
  ++step_;
  return stats;
}

}  // namespace kforge
