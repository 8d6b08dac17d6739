#include "learner/training/completion_logprobs.h"

#include <algorithm>

#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/torch_status.h"

namespace kforge {
namespace {

struct Packed {
  at::Tensor ids;        // int64 [B, T]
  at::Tensor positions;  // int64 [B, L]: the position predicting each completion token
  at::Tensor targets;    // int64 [B, L]
  at::Tensor mask;       // float32 [B, L]
};

Packed Pack(absl::Span<const TrainSequence* const> sequences) {
  const int64_t batch = static_cast<int64_t>(sequences.size());
  size_t longest = 0, longest_completion = 0;
  for (const TrainSequence* s : sequences) {
    longest = std::max(longest, s->prompt.size() + s->completion.size());
    longest_completion = std::max(longest_completion, s->completion.size());
  }
  const int64_t t = static_cast<int64_t>(longest), l = static_cast<int64_t>(longest_completion);
  Packed p{at::zeros({batch, t}, at::kLong), at::zeros({batch, l}, at::kLong),
           at::zeros({batch, l}, at::kLong), at::zeros({batch, l}, at::kFloat)};
  auto ids = p.ids.accessor<int64_t, 2>();
  auto positions = p.positions.accessor<int64_t, 2>();
  auto targets = p.targets.accessor<int64_t, 2>();
  auto mask = p.mask.accessor<float, 2>();
  for (int64_t b = 0; b < batch; ++b) {
    const TrainSequence& s = *sequences[b];
    const int64_t prompt = static_cast<int64_t>(s.prompt.size());
    for (int64_t i = 0; i < prompt; ++i) ids[b][i] = s.prompt[i];
    for (size_t j = 0; j < s.completion.size(); ++j) {
      const int64_t jj = static_cast<int64_t>(j);
      ids[b][prompt + jj] = s.completion[j];
      positions[b][jj] = prompt + jj - 1;
      targets[b][jj] = s.completion[j];
      mask[b][jj] = 1.0f;
    }
  }
  return p;
}

}  // namespace

absl::StatusOr<CompletionLogprobs> ComputeCompletionLogprobs(
    const DecoderModel& model, absl::Span<const TrainSequence* const> sequences,
    double temperature) {
  if (sequences.empty()) return absl::InvalidArgumentError("no sequences to score");
  for (size_t i = 0; i < sequences.size(); ++i) {
    if (sequences[i]->prompt.empty() || sequences[i]->completion.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", i, ": prompt and completion must both be non-empty"));
    }
  }
  if (!(temperature > 0)) temperature = 1.0;  // greedy samples: score the plain softmax
  const Packed packed = Pack(sequences);
  const at::Device device = model.options().device;
  KF_ASSIGN_OR_RETURN(at::Tensor hidden, model.ForwardHidden(packed.ids));
  return TorchCall("completion log-probabilities", [&]() -> CompletionLogprobs {
    const at::Tensor positions = packed.positions.to(device);
    const at::Tensor index =
        positions.unsqueeze(-1).expand({positions.size(0), positions.size(1), hidden.size(-1)});
    const at::Tensor scored = hidden.gather(1, index);  // [B, L, C]
    at::Tensor logits = model.LmHead(scored).to(at::kFloat);
    // [B, L, V] passes cost: divide only when the temperature is not 1.
    if (temperature != 1.0) logits = logits / temperature;
    const at::Tensor log_softmax = at::log_softmax(logits, -1);
    CompletionLogprobs out;
    out.mask = packed.mask.to(device);
    out.logprobs =
        log_softmax.gather(-1, packed.targets.to(device).unsqueeze(-1)).squeeze(-1);
    c10::NoGradGuard no_grad;
    // The Monte-Carlo entropy estimate -log p(sampled token): unbiased for
    // tokens drawn from this policy at this temperature, and free, where the
    // exact entropy would take three more passes over [B, L, V].
    out.entropy_sum = -(out.logprobs.detach() * out.mask).sum();
    return out;
  });
}

at::Tensor PackPerToken(absl::Span<const TrainSequence* const> sequences,
                        std::vector<float> TrainSequence::*field, const at::Device& device) {
  size_t longest = 0;
  for (const TrainSequence* s : sequences) longest = std::max(longest, s->completion.size());
  at::Tensor packed =
      at::zeros({static_cast<int64_t>(sequences.size()), static_cast<int64_t>(longest)}, at::kFloat);
  auto rows = packed.accessor<float, 2>();
  for (size_t b = 0; b < sequences.size(); ++b) {
    const std::vector<float>& values = sequences[b]->*field;
    const size_t n = std::min(values.size(), sequences[b]->completion.size());
    for (size_t j = 0; j < n; ++j) rows[static_cast<int64_t>(b)][static_cast<int64_t>(j)] = values[j];
  }
  return packed.to(device);
}

}  // namespace kforge
