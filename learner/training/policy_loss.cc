#include "learner/training/policy_loss.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <c10/core/GradMode.h>

namespace kforge {

std::vector<double> GroupAdvantages(absl::Span<const double> rewards, bool scale_by_std,
                                    double eps) {
  std::vector<double> advantages(rewards.size(), 0.0);
  if (rewards.size() < 2) return advantages;
  // Equal rewards carry no signal; exact zeros keep them out of the loss
  // (the mean of equal values need not be exactly that value in floating
  // point, so compare the rewards, not the deviations).
  if (std::all_of(rewards.begin(), rewards.end(), [&](double r) { return r == rewards[0]; })) {
    return advantages;
  }
  const double n = static_cast<double>(rewards.size());
  const double mean = std::accumulate(rewards.begin(), rewards.end(), 0.0) / n;
  double squares = 0;
  for (double r : rewards) squares += (r - mean) * (r - mean);
  const double scale = scale_by_std ? std::sqrt(squares / (n - 1)) + eps : 1.0;
  for (size_t i = 0; i < rewards.size(); ++i) advantages[i] = (rewards[i] - mean) / scale;
  return advantages;
}

at::Tensor TruncatedImportanceWeights(const at::Tensor& old_logprobs,
                                      const at::Tensor& sampler_logprobs, double cap) {
  c10::NoGradGuard no_grad;
  return at::clamp_max(at::exp(old_logprobs.detach() - sampler_logprobs.detach()), cap);
}

PolicyLoss GrpoLoss(const PolicyLossInputs& in, const GrpoLossParams& params,
                    double normaliser) {
  const at::Tensor log_ratio = in.logprobs - in.old_logprobs;
  const at::Tensor ratio = at::exp(log_ratio);
  const at::Tensor clipped = at::clamp(ratio, 1.0 - params.clip_low, 1.0 + params.clip_high);
  at::Tensor pg = -at::min(ratio * in.advantages, clipped * in.advantages);
  at::Tensor capped;  // 1 where the TIS weight was cut to the cap
  if (params.tis_cap > 0 && in.sampler_logprobs.defined()) {
    pg = TruncatedImportanceWeights(in.old_logprobs, in.sampler_logprobs, params.tis_cap) * pg;
    c10::NoGradGuard no_grad;
    capped = (in.old_logprobs.detach() - in.sampler_logprobs.detach() > std::log(params.tis_cap))
                 .to(at::kFloat);
  }
  at::Tensor per_token = pg;
  at::Tensor kl;
  if (params.kl_coef > 0 && in.ref_logprobs.defined()) {
    at::Tensor delta = in.ref_logprobs - in.logprobs;
    // Past this log-ratio exp(d) - d - 1 is above any ceiling a job may set
    // (1e6), and in float32 exp would reach inf, whose backward through the
    // ceiling's clamp is 0 x inf = NaN.
    constexpr double kMaxLogRatio = 20.0;
    if (params.kl_max > 0) delta = at::clamp(delta, -kMaxLogRatio, kMaxLogRatio);
    kl = at::exp(delta) - delta - 1.0;
    if (params.kl_max > 0) kl = at::clamp_max(kl, params.kl_max);
    per_token = per_token + params.kl_coef * kl;
  }
  PolicyLoss out;
  out.loss = (per_token * in.mask).sum() / normaliser;
  c10::NoGradGuard no_grad;
  const at::Tensor outside =
      (ratio < 1.0 - params.clip_low).logical_or(ratio > 1.0 + params.clip_high).to(at::kFloat);
  const at::Tensor mask = in.mask.detach();
  out.sums = at::stack({(pg.detach() * mask).sum(),
                        kl.defined() ? (kl.detach() * mask).sum() : at::zeros({}, mask.options()),
                        (outside * mask).sum(), (ratio.detach() * mask).sum(), mask.sum(),
                        capped.defined() ? (capped * mask).sum() : at::zeros({}, mask.options())});
  return out;
}

PolicyLoss SupervisedLoss(const PolicyLossInputs& in, double normaliser) {
  PolicyLoss out;
  out.loss = -(in.logprobs * in.mask).sum() / normaliser;
  c10::NoGradGuard no_grad;
  const at::Tensor mask = in.mask.detach();
  const at::Tensor tokens = mask.sum();
  const at::Tensor zero = at::zeros({}, mask.options());
  out.sums = at::stack({-(in.logprobs.detach() * mask).sum(), zero, zero, tokens, tokens, zero});
  return out;
}

}  // namespace kforge
