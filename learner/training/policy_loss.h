// The losses the learner optimises, as plain tensor functions over the
// completion tokens of a batch, flattened: token i of the batch has its
// current log-probability logprobs[i], its behaviour (old) log-probability
// old_logprobs[i], its advantage advantages[i] and mask[i] (1 for a token
// that counts, 0 for padding). Every loss is a token-level sum divided by
// `normaliser`, the number of counted tokens in the whole optimiser batch,
// so that micro-batches accumulate to the same gradient as one big batch.
//
//   std::vector<double> adv = GroupAdvantages(rewards, /*scale_by_std=*/true);
//   PolicyLoss loss = GrpoLoss({logp, old, advantages, ref, mask},
//                              {.clip_low = 0.2, .clip_high = 0.28, .kl_coef = 0.0}, tokens);
//   loss.loss.backward();
//
// GRPO (Shao et al. 2024, with DAPO's decoupled clip bounds and token-level
// averaging): per token,
//   ratio = exp(logp - old_logp)
//   pg    = -min(ratio * A, clamp(ratio, 1 - clip_low, 1 + clip_high) * A)
//   kl    = exp(ref - logp) - (ref - logp) - 1          (the k3 estimator)
//   loss  = sum(mask * (pg + kl_coef * kl)) / normaliser
// Supervised (SFT, best-of-N): loss = -sum(mask * logp) / normaliser.
#ifndef KFORGE_LEARNER_TRAINING_POLICY_LOSS_H_
#define KFORGE_LEARNER_TRAINING_POLICY_LOSS_H_

#include <vector>

#include <ATen/ATen.h>

#include "absl/types/span.h"

namespace kforge {

// Group-relative advantages: reward minus the group mean, divided by the
// group's sample standard deviation (n - 1, as TRL's GRPO) plus `eps` when
// scale_by_std. A group of one, or of equal rewards, gets zeros.
std::vector<double> GroupAdvantages(absl::Span<const double> rewards, bool scale_by_std,
                                    double eps = 1e-4);

struct PolicyLossInputs {
  at::Tensor logprobs;      // float32 [N], connected to the graph
  at::Tensor old_logprobs;  // float32 [N]
  at::Tensor advantages;    // float32 [N]
  at::Tensor ref_logprobs;  // float32 [N]; undefined when kl_coef is 0
  at::Tensor mask;          // float32 [N], 0 or 1
};

struct GrpoLossParams {
  double clip_low = 0.2;
  double clip_high = 0.28;
  double kl_coef = 0.0;
};

struct PolicyLoss {
  at::Tensor loss;  // scalar, to backward
  // Sums over counted tokens, for the step's figures: detached float32
  // scalars on the loss's device, [pg, kl, clipped tokens, ratio, tokens],
  // so a step reads them back once instead of syncing per micro-batch.
  // kl is 0 without a reference; clipped counts tokens whose ratio left the
  // clip range.
  at::Tensor sums;
  double pg_sum() const { return sums[0].item<double>(); }
  double kl_sum() const { return sums[1].item<double>(); }
  double clipped_tokens() const { return sums[2].item<double>(); }
  double ratio_sum() const { return sums[3].item<double>(); }
  double tokens() const { return sums[4].item<double>(); }
};

PolicyLoss GrpoLoss(const PolicyLossInputs& in, const GrpoLossParams& params, double normaliser);

// Negative log-likelihood of the counted tokens; only logprobs and mask are
// read.
PolicyLoss SupervisedLoss(const PolicyLossInputs& in, double normaliser);

}  // namespace kforge

#endif  // KFORGE_LEARNER_TRAINING_POLICY_LOSS_H_
