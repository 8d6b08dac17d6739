#include "model/checkpoint/weight_names.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kforge {
namespace {

void AddLayer(const ModelConfig& c, int64_t layer, std::vector<WeightSpec>* out) {
  const std::string prefix = absl::StrCat("model.layers.", layer, ".");
  const int64_t q_dim = c.num_attention_heads * c.head_dim;
  const int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  const int64_t e = c.hidden_size;
  const int64_t i = c.intermediate_size;
  const std::pair<const char*, int64_t> projections[] = {
      {"q_proj", q_dim}, {"k_proj", kv_dim}, {"v_proj", kv_dim}};
  for (const auto& [proj, rows] : projections) {
    out->push_back({absl::StrCat(prefix, "self_attn.", proj, ".weight"), {rows, e}});
    if (c.attention_bias) {
      out->push_back({absl::StrCat(prefix, "self_attn.", proj, ".bias"), {rows}});
    }
  }
  out->push_back({absl::StrCat(prefix, "self_attn.o_proj.weight"), {e, q_dim}});
  if (c.qk_norm) {
    out->push_back({absl::StrCat(prefix, "self_attn.q_norm.weight"), {c.head_dim}, true});
    out->push_back({absl::StrCat(prefix, "self_attn.k_norm.weight"), {c.head_dim}, true});
  }
  out->push_back({absl::StrCat(prefix, "mlp.gate_proj.weight"), {i, e}});
  out->push_back({absl::StrCat(prefix, "mlp.up_proj.weight"), {i, e}});
  out->push_back({absl::StrCat(prefix, "mlp.down_proj.weight"), {e, i}});
  out->push_back({absl::StrCat(prefix, "input_layernorm.weight"), {e}, true});
  out->push_back({absl::StrCat(prefix, "post_attention_layernorm.weight"), {e}, true});
}

bool IsFloat(TensorDtype dtype) {
  return dtype == TensorDtype::kF32 || dtype == TensorDtype::kF16 || dtype == TensorDtype::kBF16;
}

}  // namespace

std::vector<WeightSpec> DecoderWeightSpecs(const ModelConfig& config) {
  std::vector<WeightSpec> out;
  out.push_back({"model.embed_tokens.weight", {config.vocab_size, config.hidden_size}});
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    AddLayer(config, layer, &out);
  }
  out.push_back({"model.norm.weight", {config.hidden_size}, true});
  if (!config.tie_word_embeddings) {
    out.push_back({"lm_head.weight", {config.vocab_size, config.hidden_size}});
  }
  return out;
}

absl::Status CheckDecoderWeights(const SafetensorsCheckpoint& checkpoint,
                                 const ModelConfig& config) {
  for (const WeightSpec& spec : DecoderWeightSpecs(config)) {
    const TensorView* view = checkpoint.Find(spec.name);
    if (view == nullptr) {
      return absl::NotFoundError(absl::StrCat("checkpoint lacks tensor \"", spec.name, "\", which ",
                                              config.architecture_name, " needs"));
    }
    if (view->shape != spec.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(view->file.string(), ": tensor \"", spec.name, "\" has shape [",
                       absl::StrJoin(view->shape, ", "), "]; config.json implies [",
                       absl::StrJoin(spec.shape, ", "), "]"));
    }
    if (!IsFloat(view->dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(view->file.string(), ": tensor \"", spec.name,
                                                     "\" has dtype ", TensorDtypeName(view->dtype),
                                                     "; weights must be F32, F16 or BF16"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kforge
