// The weights of a Llama / Qwen2 / Qwen3 decoder under their Hugging Face
// names, and loading them from a WeightSource: an in-memory map of tensors
// (tests, weight updates) or a safetensors checkpoint (checkpoint_loader.h).
//
//   TensorMapSource source(std::move(tensors));  // "model.embed_tokens.weight" -> ...
//   absl::StatusOr<DecoderWeights> weights = LoadDecoderWeights(
//       config, source, at::TensorOptions().dtype(at::kFloat));
//
// Loading checks that every tensor the config calls for is present with the
// shape the config implies; errors name the tensor, the expected and found
// shapes and where the tensor came from. Tensors the config does not call for
// (a tied lm_head.weight, rotary inv_freq buffers) are ignored.
#ifndef KFORGE_MODEL_TRANSFORMER_DECODER_WEIGHTS_H_
#define KFORGE_MODEL_TRANSFORMER_DECODER_WEIGHTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/checkpoint/model_config.h"

namespace kforge {

struct AttentionWeights {
  at::Tensor q_proj, k_proj, v_proj, o_proj;  // [out, in], like nn.Linear
  at::Tensor q_bias, k_bias, v_bias, o_bias;  // undefined when absent
  at::Tensor q_norm, k_norm;                  // [head_dim]; undefined without qk-norm
};

struct LayerWeights {
  at::Tensor input_layernorm;           // [hidden]
  AttentionWeights attention;
  at::Tensor post_attention_layernorm;  // [hidden]
  at::Tensor gate_proj, up_proj;        // [intermediate, hidden]
  at::Tensor down_proj;                 // [hidden, intermediate]
};

struct DecoderWeights {
  at::Tensor embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  at::Tensor norm;     // [hidden]
  at::Tensor lm_head;  // [vocab, hidden]; the same tensor as embed_tokens when tied
};

// Which optional tensors an architecture carries. Qwen2 always has q/k/v
// biases (and no o_proj bias); Llama and Qwen3 have all four biases exactly
// when attention_bias is set; Qwen3 always has q_norm/k_norm.
struct DecoderVariant {
  bool qkv_bias = false;
  bool o_bias = false;
  bool qk_norm = false;
};
DecoderVariant VariantOf(const ModelConfig& config);

// Fills the derived defaults (head_dim, num_key_value_heads) and checks the
// sizes the decoder relies on. INVALID_ARGUMENT / UNIMPLEMENTED name the field.
absl::StatusOr<ModelConfig> CheckDecoderConfig(ModelConfig config);

// One tensor the config calls for: its HF name, shape and where it lives in a
// DecoderWeights. The pointer is valid as long as that DecoderWeights is.
struct WeightBinding {
  std::string name;
  std::vector<int64_t> shape;
  at::Tensor* tensor = nullptr;
};

// Every tensor of `config` bound into *weights (whose layers are resized), in
// checkpoint order. A tied lm_head is not listed: it aliases embed_tokens.
std::vector<WeightBinding> BindDecoderWeights(const ModelConfig& config, DecoderWeights* weights);

// Where loading reads tensors from.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The tensor's shape, or nullopt when the source has no tensor `name`.
  virtual std::optional<std::vector<int64_t>> Shape(const std::string& name) const = 0;
  // The tensor, converted to `options` (device, dtype), in memory of its own.
  // Called only for names Shape() knows.
  virtual absl::StatusOr<at::Tensor> Load(const std::string& name,
                                          const at::TensorOptions& options) const = 0;
  // For error messages: the file holding `name`, or a description of the source.
  virtual std::string Origin(const std::string& name) const = 0;
};

using TensorMap = std::unordered_map<std::string, at::Tensor>;

// A WeightSource over tensors already in memory (any device and float dtype).
class TensorMapSource : public WeightSource {
 public:
  explicit TensorMapSource(TensorMap tensors) : tensors_(std::move(tensors)) {}
  std::optional<std::vector<int64_t>> Shape(const std::string& name) const override;
  absl::StatusOr<at::Tensor> Load(const std::string& name,
                                  const at::TensorOptions& options) const override;
  std::string Origin(const std::string& name) const override { return "in-memory weights"; }

 private:
  TensorMap tensors_;
};

// Loads every tensor of `config` (checked with CheckDecoderConfig first) from
// `source` onto options' device and dtype. NOT_FOUND names a missing tensor;
// INVALID_ARGUMENT a wrong shape, with both shapes. q/k/v (and their biases)
// and gate/up are then packed back to back in one storage each, every one
// still a tensor of its own: see FollowsInMemory.
absl::StatusOr<DecoderWeights> LoadDecoderWeights(const ModelConfig& config,
                                                  const WeightSource& source,
                                                  const at::TensorOptions& options);

// Whether `next` starts where `previous` ends in one storage: the packing
// LoadDecoderWeights does, which the decode step runs as one GEMM
// (decoder_layer.cc) and FlatParameters keeps.
bool FollowsInMemory(const at::Tensor& previous, const at::Tensor& next);

// "[4, 8]", for messages.
std::string ShapeString(const std::vector<int64_t>& shape);

}  // namespace kforge

#endif  // KFORGE_MODEL_TRANSFORMER_DECODER_WEIGHTS_H_
