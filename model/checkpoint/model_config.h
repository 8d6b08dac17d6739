// The architecture of a Hugging Face decoder checkpoint, read from its
// config.json: Qwen2ForCausalLM, Qwen3ForCausalLM and LlamaForCausalLM.
//
//   absl::StatusOr<ModelConfig> config = LoadModelConfig(dir / "config.json");
//   if (!config.ok()) return config.status();  // names the file and the field
//
// One struct for the three: the differences are flags (q/k/v biases for Qwen2,
// per-head q/k RMSNorm for Qwen3) and the rotary scaling (Llama 3).
#ifndef KFORGE_MODEL_CHECKPOINT_MODEL_CONFIG_H_
#define KFORGE_MODEL_CHECKPOINT_MODEL_CONFIG_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kforge {

enum class Architecture { kLlama, kQwen2, kQwen3 };

// rope_scaling of Llama 3.x ("rope_type": "llama3"); type "" means none.
struct RopeScaling {
  std::string type;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string architecture_name;  // as config.json spells it
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  bool qk_norm = false;         // RMSNorm over each head of q and k (Qwen3)
  std::string torch_dtype;      // "bfloat16", "float16", "float32"; may be ""
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;  // config.json's eos_token_id, int or list
};

// Reads and checks config.json; errors name the file and the field.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::filesystem::path& config_json);

}  // namespace kforge

#endif  // KFORGE_MODEL_CHECKPOINT_MODEL_CONFIG_H_
