#include "learner/training/adamw.h"

#include <algorithm>
#include <cmath>

#include <c10/core/GradMode.h>
#include <torch/version.h>

#include "absl/strings/str_cat.h"

namespace kforge {

double LearningRate(const LearningRateSchedule& s, int64_t step) {
  if (s.warmup_steps > 0 && step < s.warmup_steps) {
    return s.peak * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  }
  const int64_t decay_steps = std::max<int64_t>(1, s.total_steps - s.warmup_steps);
  const double progress =
      std::clamp(static_cast<double>(step - s.warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  return s.peak * (1.0 - progress * (1.0 - s.min_lr_ratio));
}

AdamW::AdamW(std::vector<std::pair<std::string, at::Tensor>> params, AdamWParams hyper)
    : hyper_(hyper) {
  c10::NoGradGuard no_grad;
  for (auto& [name, param] : params) {
    param.requires_grad_(true);
    Slot slot{name, param};
    if (param.scalar_type() != at::kFloat) slot.master = param.detach().to(at::kFloat).clone();
    const at::Tensor& reference = slot.master.defined() ? slot.master : param;
    slot.exp_avg = at::zeros_like(reference, reference.options().requires_grad(false));
    slot.exp_avg_sq = at::zeros_like(reference, reference.options().requires_grad(false));
    slot.decay = param.dim() >= 2;
    slots_.push_back(std::move(slot));
  }
}

void AdamW::ZeroGrad() {
  for (Slot& slot : slots_) {
    if (slot.param.grad().defined()) slot.param.mutable_grad().zero_();
  }
}

double AdamW::ClipGradNorm(double max_norm) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  for (Slot& slot : slots_) {
    if (slot.param.grad().defined()) norms.push_back(slot.param.grad().to(at::kFloat).norm());
  }
  if (norms.empty()) return 0.0;
  // One host sync for the whole model, not one per tensor.
  const double norm = at::stack(norms).pow(2).sum().sqrt().item<double>();
  if (max_norm > 0 && norm > max_norm && std::isfinite(norm)) {
    const double scale = max_norm / (norm + 1e-6);
    for (Slot& slot : slots_) {
      if (slot.param.grad().defined()) slot.param.mutable_grad().mul_(scale);
    }
  }
  return norm;
}

bool AdamW::UseFused() const {
#if TORCH_VERSION_MAJOR >= 2
  return hyper_.fused && !slots_.empty() && slots_.front().param.is_cuda();
#else
  return false;  // LibTorch 1.x has no fused AdamW kernel
#endif
}

void AdamW::FusedStep(double lr, std::vector<at::Tensor>& weights, std::vector<at::Tensor>& grads,
                      std::vector<at::Tensor>& exp_avg, std::vector<at::Tensor>& exp_avg_sq,
                      const std::vector<bool>& decay) {
#if TORCH_VERSION_MAJOR >= 2
  // The kernel takes one weight decay per call: matrices, then the rest.
  // Its bias corrections come from a step count per tensor on the device.
  const at::Tensor step = at::full({}, static_cast<double>(steps_), weights.front().options());
  for (const bool decayed : {true, false}) {
    std::vector<at::Tensor> w, g, m, v, steps;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (decay[i] != decayed) continue;
      w.push_back(weights[i]);
      g.push_back(grads[i]);
      m.push_back(exp_avg[i]);
      v.push_back(exp_avg_sq[i]);
      steps.push_back(step);  // read, not written
    }
    if (w.empty()) continue;
    at::_fused_adamw_(w, g, m, v, /*max_exp_avg_sqs=*/{}, steps, lr, hyper_.beta1, hyper_.beta2,
                      decayed ? hyper_.weight_decay : 0.0, hyper_.eps, /*amsgrad=*/false,
                      /*maximize=*/false);
  }
#else
  (void)lr, (void)weights, (void)grads, (void)exp_avg, (void)exp_avg_sq, (void)decay;
#endif
}

void AdamW::Step(double lr) {
  c10::NoGradGuard no_grad;
  ++steps_;
  const double bias1 = 1.0 - std::pow(hyper_.beta1, static_cast<double>(steps_));
  const double bias2 = 1.0 - std::pow(hyper_.beta2, static_cast<double>(steps_));
  // One multi-tensor (_foreach_) kernel per operation over every parameter,
  // rather than a launch per parameter and operation.
  std::vector<at::Tensor> weights, grads, exp_avg, exp_avg_sq, decayed, low_precision, masters;
  std::vector<bool> decay;
  for (Slot& slot : slots_) {
    if (!slot.param.grad().defined()) continue;
    at::Tensor weight = slot.master.defined() ? slot.master : slot.param.detach();
    weights.push_back(weight);
    grads.push_back(slot.param.grad().to(at::kFloat));
    exp_avg.push_back(slot.exp_avg);
    exp_avg_sq.push_back(slot.exp_avg_sq);
    decay.push_back(slot.decay);
    if (slot.decay) decayed.push_back(weight);
    if (slot.master.defined()) {
      low_precision.push_back(slot.param.detach());
      masters.push_back(slot.master);
    }
  }
  if (weights.empty()) return;
  if (UseFused()) {
    FusedStep(lr, weights, grads, exp_avg, exp_avg_sq, decay);
    grads.clear();
    for (size_t i = 0; i < masters.size(); ++i) low_precision[i].copy_(masters[i]);
    return;
  }
  if (hyper_.weight_decay > 0 && !decayed.empty()) {
    at::_foreach_mul_(decayed, 1.0 - lr * hyper_.weight_decay);
  }
  at::_foreach_mul_(exp_avg, hyper_.beta1);
  at::_foreach_add_(exp_avg, grads, 1.0 - hyper_.beta1);
  at::_foreach_mul_(exp_avg_sq, hyper_.beta2);
  at::_foreach_addcmul_(exp_avg_sq, grads, grads, 1.0 - hyper_.beta2);
  grads.clear();  // frees the float32 copies of low-precision gradients
  std::vector<at::Tensor> denom = at::_foreach_div(exp_avg_sq, bias2);
  at::_foreach_sqrt_(denom);
  at::_foreach_add_(denom, hyper_.eps);
  at::_foreach_addcdiv_(weights, exp_avg, denom, -lr / bias1);
  for (size_t i = 0; i < masters.size(); ++i) low_precision[i].copy_(masters[i]);
}

std::vector<std::pair<std::string, at::Tensor>> AdamW::StateTensors() const {
  std::vector<std::pair<std::string, at::Tensor>> state;
  for (const Slot& slot : slots_) {
    state.emplace_back("exp_avg/" + slot.name, slot.exp_avg);
    state.emplace_back("exp_avg_sq/" + slot.name, slot.exp_avg_sq);
    if (slot.master.defined()) state.emplace_back("master/" + slot.name, slot.master);
  }
  return state;
}

absl::Status AdamW::LoadState(const std::unordered_map<std::string, at::Tensor>& state,
                              int64_t steps) {
  c10::NoGradGuard no_grad;
  auto restore = [&](const std::string& key, at::Tensor& into) -> absl::Status {
    auto it = state.find(key);
    if (it == state.end()) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer state: tensor ", key, " missing"));
    }
    if (it->second.sizes() != into.sizes()) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer state: tensor ", key,
                                                     " has the wrong shape"));
    }
    into.copy_(it->second);
    return absl::OkStatus();
  };
  for (Slot& slot : slots_) {
    if (absl::Status s = restore("exp_avg/" + slot.name, slot.exp_avg); !s.ok()) return s;
    if (absl::Status s = restore("exp_avg_sq/" + slot.name, slot.exp_avg_sq); !s.ok()) return s;
    if (slot.master.defined()) {
      if (absl::Status s = restore("master/" + slot.name, slot.master); !s.ok()) return s;
    }
  }
  steps_ = steps;
  return absl::OkStatus();
}

}  // namespace kforge
