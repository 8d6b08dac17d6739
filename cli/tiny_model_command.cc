#include "cli/tiny_model_command.h"

#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/server/executable_path.h"
#include "common/server/process_main.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/tiny_model.h"

namespace kforge {
namespace {

std::optional<Architecture> ParseArch(const std::string& arch) {
  if (arch == "qwen2") return Architecture::kQwen2;
  if (arch == "qwen3") return Architecture::kQwen3;
  if (arch == "llama") return Architecture::kLlama;
  return std::nullopt;
}

std::optional<TensorDtype> ParseDtype(const std::string& dtype) {
  if (dtype == "float32") return TensorDtype::kF32;
  if (dtype == "bfloat16") return TensorDtype::kBF16;
  return std::nullopt;
}

}  // namespace

std::filesystem::path BuiltinTinyModelCorpus() {
  return std::filesystem::path(SharedDataPath("tasks")) / "kforge-mini";
}

int RunTinyModel(const TinyModelCommandOptions& options) {
  const std::optional<Architecture> arch = ParseArch(options.arch);
  const std::optional<TensorDtype> dtype = ParseDtype(options.dtype);
  std::string problem;
  if (options.out_dir.empty()) {
    problem = "missing OUT_DIR";
  } else if (!arch.has_value()) {
    problem = absl::StrCat("--arch \"", options.arch, "\" is not qwen2, qwen3 or llama");
  } else if (!dtype.has_value()) {
    problem = absl::StrCat("--dtype \"", options.dtype, "\" is not float32 or bfloat16");
  }
  if (!problem.empty()) {
    std::fprintf(stderr, "kforge tiny-model: %s\n", problem.c_str());
    return kExitConfigError;
  }
  const absl::StatusOr<ModelConfig> config = WriteTinyModel(
      {.out_dir = options.out_dir,
       .architecture = *arch,
       .seed = options.seed,
       .dtype = *dtype,
       .tasks_dir = options.tasks_dir.empty() ? BuiltinTinyModelCorpus()
                                                : std::filesystem::path(options.tasks_dir)});
  if (!config.ok()) {
    std::fprintf(stderr, "kforge tiny-model: %s\n", config.status().ToString().c_str());
    return kExitRuntimeError;
  }
  absl::PrintF(
      "wrote a %s checkpoint to %s: vocab %d, hidden %d, %d layers, %d heads "
      "(%d key/value) of %d, %s, seed %d\n",
      config->architecture_name, options.out_dir, config->vocab_size, config->hidden_size,
      config->num_hidden_layers, config->num_attention_heads, config->num_key_value_heads,
      config->head_dim, options.dtype, options.seed);
  return kExitOk;
}

}  // namespace kforge
