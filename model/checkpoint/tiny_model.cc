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
using checkpoint::JsonBool;
using checkpoint::JsonList;
using checkpoint::JsonNull;
using checkpoint::JsonNumber;
using checkpoint::JsonObjectOf;
using checkpoint::JsonObjectValue;
using checkpoint::JsonString;
using checkpoint::JsonText;
using google::protobuf::Struct;
using google::protobuf::Value;

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

// Every JSON number is a double; config values are integers well below 2^53.
Value Number(double x) { return JsonNumber(x); }

// The fields each family's real config.json spells out: Qwen2 has neither
// head_dim nor attention_bias (its biases are not optional), Qwen3 has both.
void AddArchitectureFields(const ModelConfig& c, Struct* config) {
  auto& f = *config->mutable_fields();
  if (c.architecture == Architecture::kQwen2) f["use_sliding_window"] = JsonBool(false);
  if (c.architecture == Architecture::kQwen3) {
    f["head_dim"] = Number(static_cast<double>(c.head_dim));
    f["use_sliding_window"] = JsonBool(false);
  }
  if (c.architecture != Architecture::kQwen2) f["attention_bias"] = JsonBool(false);
  if (c.architecture == Architecture::kLlama) f["mlp_bias"] = JsonBool(false);
  if (c.rope_scaling.type == "llama3") {
    const RopeScaling& r = c.rope_scaling;
    f["rope_scaling"] = JsonObjectValue(JsonObjectOf(
        {{"rope_type", JsonString("llama3")},
         {"factor", Number(r.factor)},
         {"low_freq_factor", Number(r.low_freq_factor)},
         {"high_freq_factor", Number(r.high_freq_factor)},
         {"original_max_position_embeddings",
          Number(static_cast<double>(r.original_max_position_embeddings))}}));
  } else {
    f["rope_scaling"] = JsonNull();
  }
}

std::string ConfigJson(const ModelConfig& c) {
  std::vector<Value> eos;
  for (const int64_t id : c.eos_token_ids) eos.push_back(Number(static_cast<double>(id)));
  Struct config = JsonObjectOf(
      {{"architectures", JsonList({JsonString(c.architecture_name)})},
       {"model_type", JsonString(ModelType(c.architecture))},
       {"hidden_act", JsonString("silu")},
       {"vocab_size", Number(static_cast<double>(c.vocab_size))},
       {"hidden_size", Number(static_cast<double>(c.hidden_size))},
       {"intermediate_size", Number(static_cast<double>(c.intermediate_size))},
       {"num_hidden_layers", Number(static_cast<double>(c.num_hidden_layers))},
       {"num_attention_heads", Number(static_cast<double>(c.num_attention_heads))},
       {"num_key_value_heads", Number(static_cast<double>(c.num_key_value_heads))},
       {"max_position_embeddings", Number(static_cast<double>(c.max_position_embeddings))},
       {"rms_norm_eps", Number(c.rms_norm_eps)},
       {"rope_theta", Number(c.rope_theta)},
       {"tie_word_embeddings", JsonBool(c.tie_word_embeddings)},
       {"torch_dtype", JsonString(c.torch_dtype)},
       {"bos_token_id", Number(static_cast<double>(c.bos_token_id))},
       // One id is written as a number, several as a list, as the families do.
       {"eos_token_id", eos.size() == 1 ? eos[0] : JsonList(eos)},
       {"attention_dropout", Number(0.0)},
       {"initializer_range", Number(0.02)},
       {"use_cache", JsonBool(true)}});
  AddArchitectureFields(c, &config);
  return JsonText(config);
}

std::string GenerationConfigJson(const ChatMlTokenIds& ids) {
  return JsonText(JsonObjectOf(
      {{"bos_token_id", Number(static_cast<double>(ids.endoftext))},
       {"eos_token_id", JsonList({Number(static_cast<double>(ids.im_end)),
                                  Number(static_cast<double>(ids.endoftext))})},
       {"pad_token_id", Number(static_cast<double>(ids.endoftext))},
       {"do_sample", JsonBool(true)},
       {"temperature", Number(0.7)},
       {"top_p", Number(0.8)},
       {"top_k", Number(20)}}));
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
