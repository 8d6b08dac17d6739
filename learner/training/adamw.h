// AdamW (Loshchilov and Hutter) over a decoder's named parameters, with the
// learning-rate schedule and global gradient-norm clipping the learner uses.
// Written on ATen rather than torch::optim so its state is a flat map of
// named tensors that checkpoints store as safetensors and restore exactly.
//
//   AdamW opt(model->NamedParameters(), {.beta1 = 0.9, ...});
//   opt.ZeroGrad();  loss.backward();
//   double norm = opt.ClipGradNorm(1.0);
//   opt.Step(LearningRate(schedule, step));
//
// Parameters stored in bf16 or fp16 get an fp32 master copy: moments and the
// update are computed in fp32 and the result is rounded into the parameter,
// so small updates are not lost to bf16's 8-bit mantissa. Weight decay is
// decoupled and applies to matrices only (dim >= 2), not to norms or biases.
#ifndef KFORGE_LEARNER_TRAINING_ADAMW_H_
#define KFORGE_LEARNER_TRAINING_ADAMW_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"

namespace kforge {

struct AdamWParams {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  // On CUDA with LibTorch 2.x, one fused kernel per update (ATen's
  // _fused_adamw_, what torch.optim.AdamW(fused=True) calls) instead of
  // eight multi-tensor passes over the float32 state; the same arithmetic.
  bool fused = true;
};

// Linear warm-up from 0 over warmup_steps, then linear decay to
// min_lr_ratio * peak at total_steps (and flat after).
struct LearningRateSchedule {
  double peak = 1e-6;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double min_lr_ratio = 0.1;
};
// The rate for optimiser step `step` (0-based).
double LearningRate(const LearningRateSchedule& schedule, int64_t step);

class AdamW {
 public:
  // Sets requires_grad on every parameter.
  AdamW(std::vector<std::pair<std::string, at::Tensor>> params, AdamWParams hyper);

  void ZeroGrad();
  // Scales gradients so their global L2 norm is at most max_norm (0: no
  // clipping); returns the norm before scaling.
  double ClipGradNorm(double max_norm);
  // One update at rate lr; parameters without a gradient are left alone.
  void Step(double lr);
  int64_t steps() const { return steps_; }
  // Whether Step runs the fused kernel (AdamWParams.fused, parameters on
  // CUDA, a LibTorch that has it).
  bool fused() const { return UseFused(); }

  // "exp_avg/<name>", "exp_avg_sq/<name>" and "master/<name>" (for low
  // precision parameters), for checkpoints.
  std::vector<std::pair<std::string, at::Tensor>> StateTensors() const;
  // Restores what StateTensors wrote (on any device) and the step count.
  // INVALID_ARGUMENT naming the tensor when one is missing or misshapen.
  absl::Status LoadState(const std::unordered_map<std::string, at::Tensor>& state, int64_t steps);

 private:
  struct Slot {
    std::string name;
    at::Tensor param;
    at::Tensor master;  // fp32 copy, undefined when the parameter is fp32
    at::Tensor exp_avg, exp_avg_sq;
    bool decay = false;
  };
  bool UseFused() const;
  void FusedStep(double lr, std::vector<at::Tensor>& weights, std::vector<at::Tensor>& grads,
                 std::vector<at::Tensor>& exp_avg, std::vector<at::Tensor>& exp_avg_sq,
                 const std::vector<bool>& decay);

  std::vector<Slot> slots_;
  const AdamWParams hyper_;
  int64_t steps_ = 0;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_TRAINING_ADAMW_H_
