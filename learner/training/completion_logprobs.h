// Per-token log-probabilities of completions under a decoder, the quantity
// every learner loss is built from.
//
//   std::vector<const TrainSequence*> micro = ...;
//   KF_ASSIGN_OR_RETURN(CompletionLogprobs lp,
//                       ComputeCompletionLogprobs(model, micro, /*temperature=*/1.0));
//   // lp.logprobs [B, L] with grad, lp.mask [B, L]
//
// Sequences are packed right-padded into one [B, T] batch (T the longest
// prompt + completion). Logits are computed only at the positions that
// predict a completion token (position P + j - 1 predicts completion token
// j), never for the prompt, and divided by `temperature` before the
// log-softmax, so they are the log-probabilities of the distribution the
// rollout worker sampled from (TokenSampler applies the same temperature;
// its top-k / top-p truncation is not mirrored here: with truncation the
// behaviour log-probabilities are those of the truncated distribution, and
// `recompute_old_logprobs` gives consistent ratios).
#ifndef KFORGE_LEARNER_TRAINING_COMPLETION_LOGPROBS_H_
#define KFORGE_LEARNER_TRAINING_COMPLETION_LOGPROBS_H_

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kforge {

class DecoderModel;

// One training sequence: a prompt and the completion the loss is about.
struct TrainSequence {
  std::vector<int32_t> prompt;
  std::vector<int32_t> completion;
  // One per completion token: the behaviour log-probabilities (GRPO); empty
  // for supervised objectives.
  std::vector<float> old_logprobs;
  // One per completion token (hierarchical rewards give reasoning and code
  // tokens different advantages); empty for supervised objectives.
  std::vector<float> advantages;
  // The rollout worker's log-probabilities, kept when the trainer replaces
  // old_logprobs with its own (recompute_old_logprobs), for the TIS weight;
  // empty otherwise.
  std::vector<float> sampler_logprobs;
};

struct CompletionLogprobs {
  at::Tensor logprobs;  // float32 [B, L], L the longest completion; graph-connected
  at::Tensor mask;      // float32 [B, L]: 1 for real completion tokens
  // Sum over real tokens of -log p(token), the Monte-Carlo estimate of the
  // policy's entropy for sampled completions (for supervised ones, their
  // negative log-likelihood): a detached float32 scalar on the model's
  // device, read back once per step.
  at::Tensor entropy_sum;
};

// INVALID_ARGUMENT naming the sequence for an empty prompt or completion.
absl::StatusOr<CompletionLogprobs> ComputeCompletionLogprobs(
    const DecoderModel& model, absl::Span<const TrainSequence* const> sequences,
    double temperature);

// A per-token field of `sequences` (old_logprobs or advantages) packed like
// the log-probabilities: float32 [B, L] on `device`, zeros past each end.
at::Tensor PackPerToken(absl::Span<const TrainSequence* const> sequences,
                        std::vector<float> TrainSequence::*field, const at::Device& device);

}  // namespace kforge

#endif  // KFORGE_LEARNER_TRAINING_COMPLETION_LOGPROBS_H_
