// The tensors a Llama / Qwen2 / Qwen3 checkpoint holds, by Hugging Face name
// and shape, as its config.json implies them; and a check that a checkpoint
// has them all before any is loaded.
//
//   KF_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir / "config.json"));
//   KF_ASSIGN_OR_RETURN(auto ckpt, SafetensorsCheckpoint::Open(dir));
//   KF_RETURN_IF_ERROR(CheckDecoderWeights(*ckpt, config));
//   for (const WeightSpec& w : DecoderWeightSpecs(config)) { ... ckpt->Find(w.name) ... }
//
// Per layer N (H heads, K key/value heads, D head_dim, E hidden, I intermediate):
//   model.layers.N.self_attn.q_proj.weight [H*D, E]   (+ .bias [H*D] with attention_bias)
//   model.layers.N.self_attn.k_proj.weight [K*D, E]   (+ .bias [K*D])
//   model.layers.N.self_attn.v_proj.weight [K*D, E]   (+ .bias [K*D])
//   model.layers.N.self_attn.o_proj.weight [E, H*D]   (never a bias)
//   model.layers.N.self_attn.{q,k}_norm.weight [D]     (qk_norm: Qwen3)
//   model.layers.N.mlp.{gate,up}_proj.weight [I, E], mlp.down_proj.weight [E, I]
//   model.layers.N.{input,post_attention}_layernorm.weight [E]
// and model.embed_tokens.weight [V, E], model.norm.weight [E], and
// lm_head.weight [V, E] unless tie_word_embeddings.
#ifndef KFORGE_MODEL_CHECKPOINT_WEIGHT_NAMES_H_
#define KFORGE_MODEL_CHECKPOINT_WEIGHT_NAMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/checkpoint/model_config.h"
#include "model/checkpoint/safetensors.h"

namespace kforge {

struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool is_norm = false;  // an RMSNorm scale (initialised to ones)
};

// In the order above: embeddings, layer by layer, final norm, lm_head.
std::vector<WeightSpec> DecoderWeightSpecs(const ModelConfig& config);

// NOT_FOUND naming the first missing tensor; INVALID_ARGUMENT naming a tensor
// whose shape differs (both shapes given) or whose dtype is not F32, F16 or
// BF16. Extra tensors (a tied lm_head.weight, rotary inv_freq) are allowed.
absl::Status CheckDecoderWeights(const SafetensorsCheckpoint& checkpoint,
                                 const ModelConfig& config);

}  // namespace kforge

#endif  // KFORGE_MODEL_CHECKPOINT_WEIGHT_NAMES_H_
