#include "model/transformer/random_weights.h"

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>

#include "absl/strings/match.h"
#include "common/status_macros.h"
#include "model/transformer/torch_status.h"

namespace kforge {
namespace {

at::Tensor RandomTensor(const WeightBinding& binding, at::Generator& generator) {
  const at::Tensor noise = at::randn(binding.shape, generator, at::kFloat);
  const bool is_bias = absl::EndsWith(binding.name, ".bias");
  if (binding.shape.size() == 1 && !is_bias) return 1.0 + 0.1 * noise;  // norm weights
  if (is_bias) return 0.1 * noise;
  if (binding.name == "model.embed_tokens.weight") return noise;
  return noise / std::sqrt(static_cast<double>(binding.shape[1]));  // [out, in]
}

}  // namespace

ModelConfig TinyDecoderConfig(Architecture architecture) {
  ModelConfig c;
  c.architecture = architecture;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.eos_token_ids = {1};
  switch (architecture) {
    case Architecture::kLlama:
      c.architecture_name = "LlamaForCausalLM";
      // Wavelengths at head_dim 8: 6.3, 63, 628, 6283. With an original
      // context of 64 and factors 1 / 4 the first is kept, the second
      // interpolated, the last two divided by `factor`.
      c.rope_scaling.type = "llama3";
      c.rope_scaling.factor = 4.0;
      c.rope_scaling.low_freq_factor = 1.0;
      c.rope_scaling.high_freq_factor = 4.0;
      c.rope_scaling.original_max_position_embeddings = 64;
      break;
    case Architecture::kQwen2:
      c.architecture_name = "Qwen2ForCausalLM";
      c.attention_bias = true;
      c.tie_word_embeddings = true;
      break;
    case Architecture::kQwen3:
      c.architecture_name = "Qwen3ForCausalLM";
      c.qk_norm = true;
      c.tie_word_embeddings = true;
      c.head_dim = 16;
      break;
  }
  return c;
}

absl::StatusOr<TensorMap> RandomDecoderWeights(const ModelConfig& raw_config, uint64_t seed) {
  KF_ASSIGN_OR_RETURN(const ModelConfig config, CheckDecoderConfig(raw_config));
  return TorchCall("random decoder weights", [&] {
    at::Generator generator = at::detail::createCPUGenerator(seed);
    DecoderWeights unused;
    TensorMap tensors;
    for (const WeightBinding& binding : BindDecoderWeights(config, &unused)) {
      tensors[binding.name] = RandomTensor(binding, generator);
    }
    return tensors;
  });
}

}  // namespace kforge
