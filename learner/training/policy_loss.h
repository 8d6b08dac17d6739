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
//   w     = min(exp(old_logp - sampler_logp), tis_cap)    (truncated importance
//           sampling; 1 without sampler log-probs or with tis_cap 0)
//   kl    = exp(ref - logp) - (ref - logp) - 1          (the k3 estimator)
//   loss  = sum(mask * (w * pg + kl_coef * kl)) / normaliser
// TIS (GrpoParams.tis_cap, Yao et al. 2025) corrects for the gap between the
// policy that drew the tokens (the rollout worker's, sampler_logp) and the
// one the ratio is taken against (the learner's recomputed old_logp); the
// weight is a constant of the graph, so it scales the gradient, no more.
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
  // float32 [N]: the rollout worker's log-probs when old_logprobs are the
  // learner's own (recompute_old_logprobs); undefined otherwise (no TIS).
  at::Tensor sampler_logprobs;
};

struct GrpoLossParams {
  double clip_low = 0.2;
  double clip_high = 0.28;
  double kl_coef = 0.0;
  // The per-token k3 term's ceiling; 0 leaves it unclamped (GrpoParams.kl_max).
  double kl_max = 0.0;
  // The TIS weight's cap; 0 applies no weight (GrpoParams.tis_cap).
  double tis_cap = 0.0;
};

// The per-token TIS weight, min(exp(old_logprobs - sampler_logprobs), cap),
// detached: float32, the inputs' shape.
at::Tensor TruncatedImportanceWeights(const at::Tensor& old_logprobs,
                                      const at::Tensor& sampler_logprobs, double cap);

struct PolicyLoss {
  at::Tensor loss;  // scalar, to backward
  // Sums over counted tokens, for the step's figures: detached float32
  // scalars on the loss's device, [pg, kl, clipped tokens, ratio, tokens,
  // TIS-capped tokens], so a step reads them back once instead of syncing
  // per micro-batch. kl is 0 without a reference; clipped counts tokens
  // whose ratio left the clip range; TIS-capped, tokens whose importance
  // weight was cut to tis_cap (0 without TIS).
  at::Tensor sums;
  double pg_sum() const { return sums[0].item<double>(); }
  double kl_sum() const { return sums[1].item<double>(); }
  double clipped_tokens() const { return sums[2].item<double>(); }
  double ratio_sum() const { return sums[3].item<double>(); }
  double tokens() const { return sums[4].item<double>(); }
  double tis_capped_tokens() const { return sums[5].item<double>(); }
};

PolicyLoss GrpoLoss(const PolicyLossInputs& in, const GrpoLossParams& params, double normaliser);

// Negative log-likelihood of the counted tokens; only logprobs and mask are
// read.
PolicyLoss SupervisedLoss(const PolicyLossInputs& in, double normaliser);

}  // namespace kforge

#endif  // KFORGE_LEARNER_TRAINING_POLICY_LOSS_H_
