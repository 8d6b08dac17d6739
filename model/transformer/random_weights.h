// Random weights for every tensor a config calls for, under the Hugging Face
// names: for tests and benchmarks that need a decoder but no checkpoint.
//
//   absl::StatusOr<TensorMap> tensors = RandomDecoderWeights(config, /*seed=*/7);
//   auto model = DecoderModel::Create(config, TensorMapSource(*tensors), {});
//
// Scaled so activations stay near unit size at any width (projections
// N(0, 1/fan_in), norms 1 + N(0, 0.1^2), biases N(0, 0.1^2)): logits then
// depend visibly on every tensor, which is what tests of the numerics need.
#ifndef KFORGE_MODEL_TRANSFORMER_RANDOM_WEIGHTS_H_
#define KFORGE_MODEL_TRANSFORMER_RANDOM_WEIGHTS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "model/checkpoint/model_config.h"
#include "model/transformer/decoder_weights.h"

namespace kforge {

// A decoder small enough for unit tests yet with every feature of its family:
// vocab 64, hidden 32, 2 layers, 4 query and 2 key/value heads, head_dim 8.
//   kLlama  untied lm_head, Llama 3 rope scaling whose three frequency bands
//           (kept, interpolated, divided) all occur at head_dim 8
//   kQwen2  q/k/v biases, tied embeddings
//   kQwen3  q/k norms, tied embeddings, head_dim 16 (heads x head_dim != hidden)
ModelConfig TinyDecoderConfig(Architecture architecture);

// float32 CPU tensors; the same seed gives the same tensors.
absl::StatusOr<TensorMap> RandomDecoderWeights(const ModelConfig& config, uint64_t seed);

}  // namespace kforge

#endif  // KFORGE_MODEL_TRANSFORMER_RANDOM_WEIGHTS_H_
