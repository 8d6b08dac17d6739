#include "model/checkpoint/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"
#include "model/checkpoint/bpe_trainer.h"
#include "model/checkpoint/chatml_tokenizer.h"
#include "model/checkpoint/json_fields.h"
#include "model/checkpoint/safetensors_writer.h"
#include "model/checkpoint/weight_names.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using checkpoint::JsonQuote;

constexpr size_t kMaxCorpusBytes = 4u << 20;
constexpr float kInitStd = 0.02f;

// Normal samples from a fully specified generator (std::normal_distribution
// is not the same across standard libraries): Box-Muller over mt19937_64.
class NormalSampler {
 public:
  explicit NormalSampler(uint64_t seed) : engine_(seed) {}

  float Next(float stddev) {
    if (has_spare_) {
      has_spare_ = false;
      return static_cast<float>(spare_ * stddev);
    }
    const double u1 = (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(engine_() >> 11) * 0x1.0p-53;          // [0, 1)
    const double radius = std::sqrt(-2.0 * std::log(u1));
    spare_ = radius * std::sin(2.0 * std::numbers::pi * u2);
    has_spare_ = true;
    return static_cast<float>(radius * std::cos(2.0 * std::numbers::pi * u2) * stddev);
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0;
  bool has_spare_ = false;
};

ModelConfig TinyConfig(Architecture arch, const ChatMlTokenIds& ids, TensorDtype dtype) {
  ModelConfig c;
  c.architecture = arch;
  c.vocab_size = ids.vocab_size;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 4096;
  c.rope_theta = 1e6;
  c.torch_dtype = dtype == TensorDtype::kBF16 ? "bfloat16" : "float32";
  c.bos_token_id = ids.endoftext;
  c.eos_token_ids = {ids.im_end};
  c.tie_word_embeddings = true;
  switch (arch) {
    case Architecture::kQwen2:
      c.architecture_name = "Qwen2ForCausalLM";
      c.attention_bias = true;
      break;
    case Architecture::kQwen3:
      c.architecture_name = "Qwen3ForCausalLM";
      c.head_dim = 32;
      c.qk_norm = true;
      break;
    case Architecture::kLlama:
      c.architecture_name = "LlamaForCausalLM";
      c.tie_word_embeddings = false;
      c.rope_theta = 5e5;
      c.rms_norm_eps = 1e-5;
      c.max_position_embeddings = 8192;
      c.rope_scaling = {.type = "llama3",
                        .factor = 8,
                        .low_freq_factor = 1,
                        .high_freq_factor = 4,
                        .original_max_position_embeddings = 1024};
      c.eos_token_ids = {ids.im_end, ids.endoftext};
      break;
  }
  return c;
}

// A JSON number that Python reads back as a float ("8.0", not "8").
std::string JsonFloat(double x) {
  std::string s = absl::StrCat(x);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

const char* ModelType(Architecture arch) {
  switch (arch) {
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kLlama:
      return "llama";
  }
  return "";
}

// The fields each family's real config.json spells out: Qwen2 has neither
// head_dim nor attention_bias (its biases are not optional), Qwen3 has both.
std::vector<std::string> ArchitectureFields(const ModelConfig& c) {
  std::vector<std::string> f;
  const auto add = [&f](absl::string_view key, absl::string_view value) {
    f.push_back(absl::StrCat(JsonQuote(key), ": ", value));
  };
  if (c.architecture == Architecture::kQwen2) add("use_sliding_window", "false");
  if (c.architecture == Architecture::kQwen3) {
    add("head_dim", absl::StrCat(c.head_dim));
    add("use_sliding_window", "false");
  }
  if (c.architecture != Architecture::kQwen2) add("attention_bias", "false");
  if (c.architecture == Architecture::kLlama) add("mlp_bias", "false");
  if (c.rope_scaling.type == "llama3") {
    const RopeScaling& r = c.rope_scaling;
    add("rope_scaling",
        absl::StrCat("{\"rope_type\": \"llama3\", \"factor\": ", JsonFloat(r.factor),
                     ", \"low_freq_factor\": ", JsonFloat(r.low_freq_factor),
                     ", \"high_freq_factor\": ", JsonFloat(r.high_freq_factor),
                     ", \"original_max_position_embeddings\": ", r.original_max_position_embeddings,
                     "}"));
  } else {
    add("rope_scaling", "null");
  }
  return f;
}

std::string ConfigJson(const ModelConfig& c) {
  std::vector<std::string> f = {
      absl::StrCat("\"architectures\": [", JsonQuote(c.architecture_name), "]"),
      absl::StrCat("\"model_type\": ", JsonQuote(ModelType(c.architecture))),
      "\"hidden_act\": \"silu\"",
      absl::StrCat("\"vocab_size\": ", c.vocab_size),
      absl::StrCat("\"hidden_size\": ", c.hidden_size),
      absl::StrCat("\"intermediate_size\": ", c.intermediate_size),
      absl::StrCat("\"num_hidden_layers\": ", c.num_hidden_layers),
      absl::StrCat("\"num_attention_heads\": ", c.num_attention_heads),
      absl::StrCat("\"num_key_value_heads\": ", c.num_key_value_heads),
      absl::StrCat("\"max_position_embeddings\": ", c.max_position_embeddings),
      absl::StrCat("\"rms_norm_eps\": ", JsonFloat(c.rms_norm_eps)),
      absl::StrCat("\"rope_theta\": ", JsonFloat(c.rope_theta)),
      absl::StrCat("\"tie_word_embeddings\": ", c.tie_word_embeddings ? "true" : "false"),
      absl::StrCat("\"torch_dtype\": ", JsonQuote(c.torch_dtype)),
      absl::StrCat("\"bos_token_id\": ", c.bos_token_id),
      absl::StrCat("\"eos_token_id\": ",
                   c.eos_token_ids.size() == 1
                       ? absl::StrCat(c.eos_token_ids[0])
                       : absl::StrCat("[", absl::StrJoin(c.eos_token_ids, ", "), "]")),
      "\"attention_dropout\": 0.0",
      "\"initializer_range\": 0.02",
      "\"use_cache\": true"};
  for (std::string& field : ArchitectureFields(c)) f.push_back(std::move(field));
  return absl::StrCat("{\n  ", absl::StrJoin(f, ",\n  "), "\n}\n");
}

std::string GenerationConfigJson(const ChatMlTokenIds& ids) {
  return absl::StrCat("{\n  \"bos_token_id\": ", ids.endoftext, ",\n  \"eos_token_id\": [",
                      ids.im_end, ", ", ids.endoftext, "],\n  \"pad_token_id\": ", ids.endoftext,
                      ",\n  \"do_sample\": true,\n  \"temperature\": 0.7,\n  \"top_p\": 0.8,\n"
                      "  \"top_k\": 20\n}\n");
}

absl::StatusOr<std::vector<TensorToWrite>> RandomWeights(const ModelConfig& config, uint64_t seed,
                                                         TensorDtype dtype) {
  NormalSampler sampler(seed);
  std::vector<TensorToWrite> tensors;
  for (const WeightSpec& spec : DecoderWeightSpecs(config)) {
    std::vector<float> values(static_cast<size_t>(ElementCount(spec.shape)), 1.0f);
    if (!spec.is_norm) {
      for (float& v : values) v = sampler.Next(kInitStd);
    }
    KF_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, FloatsToBytes(values, dtype));
    tensors.push_back(
        {.name = spec.name, .dtype = dtype, .shape = spec.shape, .data = std::move(bytes)});
  }
  return tensors;
}

absl::Status PrepareOutDir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) {
      return absl::AlreadyExistsError(absl::StrCat(dir.string(), ": exists and is not a folder"));
    }
    if (!fs::is_empty(dir, ec)) {
      return absl::AlreadyExistsError(
          absl::StrCat(dir.string(), ": folder is not empty; give a new or empty one"));
    }
    return absl::OkStatus();
  }
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat(dir.string(), ": cannot create: ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ReadTaskSources(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".py") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> texts;
  size_t total = 0;
  for (const fs::path& file : files) {
    KF_ASSIGN_OR_RETURN(std::string text, ReadFileToString(file.string()));
    if (total + text.size() > kMaxCorpusBytes) break;
    total += text.size();
    texts.push_back(std::move(text));
  }
  if (texts.empty()) {
    return absl::NotFoundError(
        absl::StrCat(dir.string(), ": no *.py task files to train the tokenizer on"));
  }
  return texts;
}

absl::StatusOr<ModelConfig> WriteTinyModel(const TinyModelOptions& options) {
  if (options.dtype != TensorDtype::kF32 && options.dtype != TensorDtype::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("tiny model dtype ", TensorDtypeName(options.dtype), " is not F32 or BF16"));
  }
  KF_ASSIGN_OR_RETURN(std::vector<std::string> corpus, ReadTaskSources(options.tasks_dir));
  KF_RETURN_IF_ERROR(PrepareOutDir(options.out_dir));
  const TrainedBpe bpe = TrainByteLevelBpe(corpus, {.max_merges = options.max_merges});
  KF_ASSIGN_OR_RETURN(ChatMlTokenIds ids, WriteChatMlTokenizer(options.out_dir, bpe));
  const ModelConfig config = TinyConfig(options.architecture, ids, options.dtype);
  KF_ASSIGN_OR_RETURN(std::vector<TensorToWrite> weights,
                      RandomWeights(config, options.seed, options.dtype));
  KF_RETURN_IF_ERROR(
      WriteSafetensors(options.out_dir / "model.safetensors", weights, {{"format", "pt"}}));
  KF_RETURN_IF_ERROR(WriteFileAtomically((options.out_dir / "generation_config.json").string(),
                                         GenerationConfigJson(ids)));
  // config.json last: a folder with one holds the whole checkpoint.
  KF_RETURN_IF_ERROR(
      WriteFileAtomically((options.out_dir / "config.json").string(), ConfigJson(config)));
  return config;
}

}  // namespace kforge
