// Learner training throughput (issue #5), run by hand; prints a table.
//
//   build/bin/kforge_train_bench --checkpoint DIR --device cuda:0 \
//       --sequences 16 --micro 4 --prompt_tokens 512 --completion_tokens 512 --steps 5
//
// One GRPO job step of PolicyTrainer per iteration: `sequences` sequences
// of prompt + completion tokens (the PromptToken formula, shared with
// bench/train_bench_torch.py), advantages +1 / -1 by parity, behaviour
// log-probs of -log(vocab); micro-batches of `micro`, gradient clipping at
// 1, AdamW with fp32 master weights for bf16 parameters. Reports training
// tokens per second (prompt + completion tokens through forward and
// backward), completion tokens per second and peak GPU memory.
// bench/train_bench_torch.py runs the same loss in PyTorch Python.
// With --flat (default, as the learner runs with the NCCL broadcast on) the
// parameters are first re-homed into flat buffers; afterwards the weight
// snapshot each update takes for GetWeights is timed both ways: a copy per
// tensor into pageable memory, and one pinned copy per flat buffer.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <algorithm>
#include <vector>

#include <ATen/ATen.h>
#if KFORGE_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "learner/training/policy_trainer.h"
#include "model/transformer/checkpoint_loader.h"
#include "model/weights/flat_parameters.h"
#include "model/weights/weight_stream.h"

ABSL_FLAG(std::string, checkpoint, "", "Hugging Face checkpoint folder");
ABSL_FLAG(std::string, device, "cuda:0", "cpu or cuda:N");
ABSL_FLAG(std::string, dtype, "bfloat16", "float32 or bfloat16");
ABSL_FLAG(int, sequences, 16, "sequences per step (one optimiser update)");
ABSL_FLAG(bool, fused_adamw, true,
          "AdamW's fused CUDA kernel where LibTorch has one (false: the multi-tensor passes)");
ABSL_FLAG(int, micro, 4, "sequences per forward/backward");
ABSL_FLAG(int, prompt_tokens, 512, "prompt length");
ABSL_FLAG(int, completion_tokens, 512, "completion length");
ABSL_FLAG(int, warmup, 2, "untimed steps first");
ABSL_FLAG(int, steps, 5, "timed steps");
ABSL_FLAG(bool, flat, true, "re-home the parameters into flat buffers first (as the learner does)");

namespace kforge {
namespace {

using Clock = std::chrono::steady_clock;

// Shared with bench/train_bench_torch.py: row b, position j.
int32_t PromptToken(int64_t b, int64_t j, int64_t vocab) {
  return static_cast<int32_t>((b * 7919 + j * 104729 + 17) % (vocab - 1) + 1);
}

void Sync(const at::Device& device) {
  if (device.is_cuda()) (void)at::ones({1}, at::TensorOptions().device(device)).sum().item<float>();
}

int Run() {
  const at::Device device(absl::GetFlag(FLAGS_device));
  const at::ScalarType dtype = absl::GetFlag(FLAGS_dtype) == "float32" ? at::kFloat : at::kBFloat16;
  absl::StatusOr<std::unique_ptr<DecoderModel>> model =
      LoadDecoderModel(absl::GetFlag(FLAGS_checkpoint), {device, dtype});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  const int64_t vocab = (*model)->config().vocab_size;
  const int n = absl::GetFlag(FLAGS_sequences);
  const int p = absl::GetFlag(FLAGS_prompt_tokens), c = absl::GetFlag(FLAGS_completion_tokens);
  std::vector<TrainSequence> batch(n);
  for (int b = 0; b < n; ++b) {
    for (int j = 0; j < p + c; ++j) {
      (j < p ? batch[b].prompt : batch[b].completion).push_back(PromptToken(b, j, vocab));
    }
    batch[b].old_logprobs.assign(c, static_cast<float>(-std::log(static_cast<double>(vocab))));
    batch[b].advantages.assign(c, b % 2 == 0 ? 1.0f : -1.0f);
  }
  std::unique_ptr<FlatParameters> flat;
  if (absl::GetFlag(FLAGS_flat)) {
    absl::StatusOr<std::unique_ptr<FlatParameters>> flattened = FlatParameters::Create(model->get());
    if (!flattened.ok()) {
      std::fprintf(stderr, "%s\n", std::string(flattened.status().message()).c_str());
      return 1;
    }
    flat = *std::move(flattened);
  }
  v1::OptimizerParams opt;
  opt.set_learning_rate(1e-6);
  opt.set_beta1(0.9);
  opt.set_beta2(0.999);
  opt.set_eps(1e-8);
  opt.set_max_grad_norm(1.0);
  opt.set_batch_size(n);
  opt.set_micro_batch_size(absl::GetFlag(FLAGS_micro));
  absl::StatusOr<std::unique_ptr<PolicyTrainer>> trainer = PolicyTrainer::Create(
      model->get(), nullptr,
      {.optimizer = opt,
       .schedule = {.peak = 1e-6, .total_steps = 1000},
       .fused_optimizer = absl::GetFlag(FLAGS_fused_adamw)});
  if (!trainer.ok()) {
    std::fprintf(stderr, "%s\n", std::string(trainer.status().message()).c_str());
    return 1;
  }
  auto step = [&] {
    absl::StatusOr<TrainStepStats> stats = (*trainer)->Step(batch, {.objective = Objective::kGrpo});
    if (!stats.ok()) std::fprintf(stderr, "%s\n", std::string(stats.status().message()).c_str());
    return stats.ok();
  };
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) {
    if (!step()) return 1;
  }
  Sync(device);
#if KFORGE_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  const int steps = absl::GetFlag(FLAGS_steps);
  const auto start = Clock::now();
  for (int i = 0; i < steps; ++i) {
    if (!step()) return 1;
  }
  Sync(device);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  double peak_gib = 0;
#if KFORGE_WITH_CUDA
  if (device.is_cuda()) {
    peak_gib = static_cast<double>(
                   c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
                       .allocated_bytes[0].peak) / (1 << 30);
  }
#endif
  const double tokens = static_cast<double>(steps) * n * (p + c);
  std::printf("%-10s %-9s %9s %6s %8s %8s %12s %14s %10s\n", "impl", "dtype", "sequences", "micro",
              "prompt", "complete", "s/step", "train tok/s", "peak GiB");
  std::printf("%-10s %-9s %9d %6d %8d %8d %12.3f %14.0f %10.1f\n",
              (*trainer)->optimizer().fused() ? "kforge" : "kforge-mt",
              absl::GetFlag(FLAGS_dtype).c_str(),
              n, absl::GetFlag(FLAGS_micro), p, c, seconds / steps, tokens / seconds, peak_gib);
  if (flat != nullptr && device.is_cuda()) {
    // Median of 3 each, alternating.
    std::vector<double> per_tensor, pinned;
    for (int i = 0; i < 3; ++i) {
      for (const FlatParameters* source : std::vector<const FlatParameters*>{nullptr, flat.get()}) {
        const auto started = Clock::now();
        absl::StatusOr<std::shared_ptr<const WeightSnapshot>> snapshot =
            WeightSnapshot::Capture(model->get(), "bench", i + 1, source);
        if (!snapshot.ok()) {
          std::fprintf(stderr, "%s\n", std::string(snapshot.status().message()).c_str());
          return 1;
        }
        (source == nullptr ? per_tensor : pinned)
            .push_back(std::chrono::duration<double>(Clock::now() - started).count());
      }
    }
    std::sort(per_tensor.begin(), per_tensor.end());
    std::sort(pinned.begin(), pinned.end());
    std::printf("weight snapshot of %.2f GB: per tensor (pageable) %.3f s, per flat buffer (pinned) "
                "%.3f s\n", static_cast<double>(flat->bytes()) / 1e9, per_tensor[1], pinned[1]);
  }
  return 0;
}

}  // namespace
}  // namespace kforge

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return kforge::Run();
}
