#include "model/checkpoint/model_config.h"

#include <google/protobuf/struct.pb.h>

#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"
#include "model/checkpoint/json_fields.h"

namespace kforge {
namespace {

using checkpoint::JsonObject;
using ::google::protobuf::Value;

struct ArchitectureDefaults {
  const char* name;
  Architecture architecture;
  int64_t max_position_embeddings;  // the transformers config class's default
};

constexpr ArchitectureDefaults kArchitectures[] = {
    {"LlamaForCausalLM", Architecture::kLlama, 2048},
    {"Qwen2ForCausalLM", Architecture::kQwen2, 32768},
    {"Qwen3ForCausalLM", Architecture::kQwen3, 32768},
};

absl::StatusOr<const ArchitectureDefaults*> ReadArchitecture(const JsonObject& json) {
  const Value* list = json.Find("architectures");
  if (list == nullptr) return json.FieldError("architectures", "is missing");
  if (list->kind_case() != Value::kListValue || list->list_value().values_size() == 0 ||
      list->list_value().values(0).kind_case() != Value::kStringValue) {
    return json.FieldError("architectures", "is not a non-empty list of strings");
  }
  const std::string& name = list->list_value().values(0).string_value();
  for (const ArchitectureDefaults& known : kArchitectures) {
    if (name == known.name) return &known;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(json.where(), ": architecture \"", name,
                   "\" (architectures[0]) is not supported; kforge loads LlamaForCausalLM, "
                   "Qwen2ForCausalLM and Qwen3ForCausalLM"));
}

absl::Status ReadDimensions(const JsonObject& json, const ArchitectureDefaults& arch,
                            ModelConfig* config) {
  KF_ASSIGN_OR_RETURN(config->vocab_size, json.RequiredInt("vocab_size"));
  KF_ASSIGN_OR_RETURN(config->hidden_size, json.RequiredInt("hidden_size"));
  KF_ASSIGN_OR_RETURN(config->intermediate_size, json.RequiredInt("intermediate_size"));
  KF_ASSIGN_OR_RETURN(config->num_hidden_layers, json.RequiredInt("num_hidden_layers"));
  KF_ASSIGN_OR_RETURN(config->num_attention_heads, json.RequiredInt("num_attention_heads"));
  KF_ASSIGN_OR_RETURN(config->num_key_value_heads,
                      json.IntOr("num_key_value_heads", config->num_attention_heads));
  // Qwen3 (and newer Llama) configs spell head_dim out; it need not be
  // hidden_size / num_attention_heads there.
  const int64_t derived_head_dim =
      config->num_attention_heads > 0 ? config->hidden_size / config->num_attention_heads : 0;
  KF_ASSIGN_OR_RETURN(config->head_dim, json.IntOr("head_dim", derived_head_dim));
  KF_ASSIGN_OR_RETURN(config->max_position_embeddings,
                      json.IntOr("max_position_embeddings", arch.max_position_embeddings));
  KF_ASSIGN_OR_RETURN(config->rms_norm_eps, json.DoubleOr("rms_norm_eps", 1e-6));
  KF_ASSIGN_OR_RETURN(config->rope_theta, json.DoubleOr("rope_theta", 10000.0));
  KF_ASSIGN_OR_RETURN(config->tie_word_embeddings, json.BoolOr("tie_word_embeddings", false));
  return absl::OkStatus();
}

// What differs between the three: Qwen2's q/k/v always carry a bias (its
// config has no switch), Qwen3 normalises q and k per head.
absl::Status ReadAttentionFlags(const JsonObject& json, ModelConfig* config) {
  KF_ASSIGN_OR_RETURN(bool attention_bias, json.BoolOr("attention_bias", false));
  config->attention_bias = config->architecture == Architecture::kQwen2 || attention_bias;
  config->qk_norm = config->architecture == Architecture::kQwen3;
  KF_ASSIGN_OR_RETURN(bool mlp_bias, json.BoolOr("mlp_bias", false));
  if (mlp_bias) {
    return absl::UnimplementedError(
        absl::StrCat(json.where(), ": mlp_bias=true is not implemented"));
  }
  KF_ASSIGN_OR_RETURN(bool sliding_window, json.BoolOr("use_sliding_window", false));
  if (sliding_window) {
    return absl::UnimplementedError(
        absl::StrCat(json.where(), ": use_sliding_window=true is not implemented"));
  }
  KF_ASSIGN_OR_RETURN(std::string act, json.StringOr("hidden_act", "silu"));
  if (act != "silu") {
    return absl::UnimplementedError(
        absl::StrCat(json.where(), ": hidden_act \"", act, "\" is not implemented (only silu)"));
  }
  return absl::OkStatus();
}

absl::Status ReadLlama3Scaling(const JsonObject& scaling, RopeScaling* out) {
  KF_ASSIGN_OR_RETURN(out->factor, scaling.RequiredDouble("factor"));
  KF_ASSIGN_OR_RETURN(out->low_freq_factor, scaling.RequiredDouble("low_freq_factor"));
  KF_ASSIGN_OR_RETURN(out->high_freq_factor, scaling.RequiredDouble("high_freq_factor"));
  KF_ASSIGN_OR_RETURN(out->original_max_position_embeddings,
                      scaling.RequiredInt("original_max_position_embeddings"));
  if (out->factor <= 0) {
    return scaling.FieldError("factor", absl::StrCat("is ", out->factor, "; must be positive"));
  }
  if (out->high_freq_factor <= out->low_freq_factor) {
    return scaling.FieldError(
        "high_freq_factor", absl::StrCat("is ", out->high_freq_factor,
                                         "; must be above low_freq_factor ", out->low_freq_factor));
  }
  if (out->original_max_position_embeddings <= 0) {
    return scaling.FieldError("original_max_position_embeddings", "must be positive");
  }
  out->type = "llama3";
  return absl::OkStatus();
}

absl::Status ReadRopeScaling(const JsonObject& json, RopeScaling* out) {
  const Value* value = json.Find("rope_scaling");
  if (value == nullptr) return absl::OkStatus();
  if (value->kind_case() != Value::kStructValue) {
    return json.FieldError("rope_scaling", "is neither null nor an object");
  }
  const JsonObject scaling(value->struct_value(), absl::StrCat(json.where(), ": rope_scaling"));
  // transformers renamed "type" to "rope_type"; files carry either.
  KF_ASSIGN_OR_RETURN(std::string type, scaling.StringOr("rope_type", ""));
  if (type.empty()) {
    KF_ASSIGN_OR_RETURN(type, scaling.StringOr("type", "default"));
  }
  if (type == "default") return absl::OkStatus();
  if (type == "llama3") return ReadLlama3Scaling(scaling, out);
  return absl::UnimplementedError(absl::StrCat(json.where(), ": rope_scaling type \"", type,
                                               "\" is not implemented (only \"llama3\")"));
}

absl::Status ReadTokenIds(const JsonObject& json, ModelConfig* config) {
  KF_ASSIGN_OR_RETURN(config->bos_token_id, json.IntOr("bos_token_id", -1));
  const Value* eos = json.Find("eos_token_id");
  if (eos == nullptr) return absl::OkStatus();
  if (eos->kind_case() == Value::kListValue) {
    for (const Value& id : eos->list_value().values()) {
      std::optional<int64_t> x = checkpoint::AsInt(id);
      if (!x.has_value()) return json.FieldError("eos_token_id", "holds a non-integer");
      config->eos_token_ids.push_back(*x);
    }
    return absl::OkStatus();
  }
  std::optional<int64_t> x = checkpoint::AsInt(*eos);
  if (!x.has_value()) return json.FieldError("eos_token_id", "is neither an integer nor a list");
  config->eos_token_ids.push_back(*x);
  return absl::OkStatus();
}

absl::Status CheckPositive(const JsonObject& json, const char* name, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return json.FieldError(name, absl::StrCat("is ", value, "; must be positive"));
}

absl::Status Validate(const JsonObject& json, const ModelConfig& c) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings}};
  for (const auto& [name, value] : sizes) KF_RETURN_IF_ERROR(CheckPositive(json, name, value));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return json.FieldError("num_key_value_heads", absl::StrCat("is ", c.num_key_value_heads,
                                                               "; must divide num_attention_heads ",
                                                               c.num_attention_heads));
  }
  if (json.Find("head_dim") == nullptr && c.hidden_size % c.num_attention_heads != 0) {
    return json.FieldError("num_attention_heads",
                           absl::StrCat("is ", c.num_attention_heads, "; must divide hidden_size ",
                                        c.hidden_size, " (there is no head_dim)"));
  }
  if (c.head_dim % 2 != 0) {
    return json.FieldError("head_dim", absl::StrCat("is ", c.head_dim, "; rotary needs it even"));
  }
  if (c.rms_norm_eps <= 0) return json.FieldError("rms_norm_eps", "must be positive");
  if (c.rope_theta <= 0) return json.FieldError("rope_theta", "must be positive");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> LoadModelConfig(const std::filesystem::path& config_json) {
  KF_ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_json.string()));
  absl::StatusOr<google::protobuf::Struct> root = checkpoint::ParseJsonObject(text);
  if (!root.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_json.string(), ": malformed JSON: ", root.status().message()));
  }
  const JsonObject json(*root, config_json.string());
  ModelConfig config;
  KF_ASSIGN_OR_RETURN(const ArchitectureDefaults* arch, ReadArchitecture(json));
  config.architecture = arch->architecture;
  config.architecture_name = arch->name;
  KF_RETURN_IF_ERROR(ReadDimensions(json, *arch, &config));
  KF_RETURN_IF_ERROR(ReadAttentionFlags(json, &config));
  KF_RETURN_IF_ERROR(ReadRopeScaling(json, &config.rope_scaling));
  KF_RETURN_IF_ERROR(ReadTokenIds(json, &config));
  // Newer transformers write "dtype" where older ones wrote "torch_dtype".
  KF_ASSIGN_OR_RETURN(config.torch_dtype, json.StringOr("torch_dtype", ""));
  if (config.torch_dtype.empty()) {
    KF_ASSIGN_OR_RETURN(config.torch_dtype, json.StringOr("dtype", ""));
  }
  KF_RETURN_IF_ERROR(Validate(json, config));
  return config;
}

}  // namespace kforge
