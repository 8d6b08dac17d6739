// A small random checkpoint in Hugging Face's layout, for tests and smoke
// runs that need a real model folder but not a trained model: what
// `kforge tiny-model` writes.
//
//   KF_ASSIGN_OR_RETURN(ModelConfig config,
//                       WriteTinyModel({.out_dir = "/tmp/tiny",
//                                       .architecture = Architecture::kQwen3,
//                                       .tasks_dir = BuiltinTinyModelCorpus()}));
//
// The folder then holds config.json, generation_config.json,
// model.safetensors, tokenizer.json and tokenizer_config.json. Shapes: hidden
// 64, 2 layers, 4 heads, 2 key/value heads, intermediate 128, vocabulary the
// tokenizer's (256 bytes + the merges learned from the *.py files under
// tasks_dir + <|endoftext|>, <|im_start|>, <|im_end|>). Per architecture, as
// the real families are:
//   qwen2  q/k/v biases, tied embeddings, head_dim implied (16), rope_theta 1e6
//   qwen3  q/k norms, tied embeddings, head_dim 32 given explicitly
//          (q_proj is [128, 64]: heads x head_dim != hidden), rope_theta 1e6
//   llama  untied lm_head, Llama 3 rope_scaling (factor 8, original 1024),
//          rope_theta 5e5, eos_token_id a list
// Weights are normal(0, 0.02) from `seed` (the same seed gives the same bytes
// on every platform), RMSNorm scales are ones.
#ifndef KFORGE_MODEL_CHECKPOINT_TINY_MODEL_H_
#define KFORGE_MODEL_CHECKPOINT_TINY_MODEL_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint/model_config.h"
#include "model/checkpoint/safetensors.h"

namespace kforge {

struct TinyModelOptions {
  std::filesystem::path out_dir;  // created; must be empty if it exists
  Architecture architecture = Architecture::kQwen2;
  uint64_t seed = 0;
  TensorDtype dtype = TensorDtype::kF32;  // kF32 or kBF16
  // Folder whose *.py files (searched recursively) train the tokenizer: the
  // built-in task sets (share/kforge/tasks beside the binary).
  std::filesystem::path tasks_dir;
  int max_merges = 400;
};

// Returns the config it wrote. NOT_FOUND when tasks_dir holds no *.py file,
// ALREADY_EXISTS when out_dir is not empty, INVALID_ARGUMENT for a dtype
// other than F32/BF16; write errors name the file.
absl::StatusOr<ModelConfig> WriteTinyModel(const TinyModelOptions& options);

// The *.py files under `dir`, sorted by path, up to 4 MiB in all.
absl::StatusOr<std::vector<std::string>> ReadTaskSources(const std::filesystem::path& dir);

}  // namespace kforge

#endif  // KFORGE_MODEL_CHECKPOINT_TINY_MODEL_H_
