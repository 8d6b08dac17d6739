// `kforge tiny-model OUT_DIR [--arch qwen2|qwen3|llama] [--seed N]
// [--dtype float32|bfloat16]`: writes a small random checkpoint in Hugging
// Face's layout (config.json, generation_config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json) for tests and smoke runs; see
// model/checkpoint/tiny_model.h for what it holds. The tokenizer is trained
// on the built-in task set installed beside the binary
// (share/kforge/tasks/kforge-mini: its tasks and their solutions).
// Exit code 0 when written, 1 when writing failed, 2 for bad arguments.
#ifndef KFORGE_CLI_TINY_MODEL_COMMAND_H_
#define KFORGE_CLI_TINY_MODEL_COMMAND_H_

#include <cstdint>
#include <filesystem>
#include <string>

namespace kforge {

struct TinyModelCommandOptions {
  std::string out_dir;
  std::string arch = "qwen2";  // qwen2, qwen3 or llama
  uint64_t seed = 0;
  std::string dtype = "float32";  // float32 or bfloat16
  std::string tasks_dir;          // empty: BuiltinTinyModelCorpus()
};

// The text the built-in tiny model's tokenizer is trained on: the built-in
// task set the default `kforge local` job trains on (not every task folder
// beside it: the KernelBench solutions are GPU-job material, and would
// push the built-in set out of the corpus's size bound).
std::filesystem::path BuiltinTinyModelCorpus();

int RunTinyModel(const TinyModelCommandOptions& options);

}  // namespace kforge

#endif  // KFORGE_CLI_TINY_MODEL_COMMAND_H_
