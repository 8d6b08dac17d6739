#include "model/transformer/decoder_weights.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/transformer/torch_status.h"

namespace kforge {
namespace {

absl::Status RequirePositive(absl::string_view field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("model config: ", field, " is ", value,
                                                 ", must be positive"));
}

absl::Status CheckRopeScaling(const RopeScaling& scaling) {
  if (scaling.type.empty() || scaling.type == "default") return absl::OkStatus();
  if (scaling.type != "llama3") {
    return absl::UnimplementedError(absl::StrCat(
        "model config: rope_scaling type \"", scaling.type, "\" is not supported (only llama3)"));
  }
  if (!(scaling.factor > 0) || !(scaling.high_freq_factor > scaling.low_freq_factor) ||
      !(scaling.low_freq_factor > 0) || scaling.original_max_position_embeddings <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: llama3 rope_scaling needs factor > 0 and high_freq_factor > "
        "low_freq_factor > 0, got factor ",
        scaling.factor, ", low_freq_factor ", scaling.low_freq_factor, ", high_freq_factor ",
        scaling.high_freq_factor, ", original_max_position_embeddings ",
        scaling.original_max_position_embeddings));
  }
  return absl::OkStatus();
}

void Bind(std::vector<WeightBinding>* out, std::string name, std::vector<int64_t> shape,
          at::Tensor* tensor) {
  out->push_back(WeightBinding{std::move(name), std::move(shape), tensor});
}

void BindLayer(const ModelConfig& c, const DecoderVariant& variant, int64_t index,
               LayerWeights* layer, std::vector<WeightBinding>* out) {
  const std::string p = absl::StrCat("model.layers.", index, ".");
  const int64_t q_out = c.num_attention_heads * c.head_dim;
  const int64_t kv_out = c.num_key_value_heads * c.head_dim;
  AttentionWeights& a = layer->attention;
  Bind(out, p + "input_layernorm.weight", {c.hidden_size}, &layer->input_layernorm);
  Bind(out, p + "self_attn.q_proj.weight", {q_out, c.hidden_size}, &a.q_proj);
  Bind(out, p + "self_attn.k_proj.weight", {kv_out, c.hidden_size}, &a.k_proj);
  Bind(out, p + "self_attn.v_proj.weight", {kv_out, c.hidden_size}, &a.v_proj);
  Bind(out, p + "self_attn.o_proj.weight", {c.hidden_size, q_out}, &a.o_proj);
  if (variant.qkv_bias) {
    Bind(out, p + "self_attn.q_proj.bias", {q_out}, &a.q_bias);
    Bind(out, p + "self_attn.k_proj.bias", {kv_out}, &a.k_bias);
    Bind(out, p + "self_attn.v_proj.bias", {kv_out}, &a.v_bias);
  }
  if (variant.o_bias) Bind(out, p + "self_attn.o_proj.bias", {c.hidden_size}, &a.o_bias);
  if (variant.qk_norm) {
    Bind(out, p + "self_attn.q_norm.weight", {c.head_dim}, &a.q_norm);
    Bind(out, p + "self_attn.k_norm.weight", {c.head_dim}, &a.k_norm);
  }
  Bind(out, p + "post_attention_layernorm.weight", {c.hidden_size},
       &layer->post_attention_layernorm);
  Bind(out, p + "mlp.gate_proj.weight", {c.intermediate_size, c.hidden_size}, &layer->gate_proj);
  Bind(out, p + "mlp.up_proj.weight", {c.intermediate_size, c.hidden_size}, &layer->up_proj);
  Bind(out, p + "mlp.down_proj.weight", {c.hidden_size, c.intermediate_size}, &layer->down_proj);
}

// Presence and shape, before any data is converted.
absl::Status CheckPresentWithShape(const WeightBinding& binding, const WeightSource& source) {
  std::optional<std::vector<int64_t>> found = source.Shape(binding.name);
  if (!found.has_value()) {
    return absl::NotFoundError(absl::StrCat("tensor ", binding.name, " (shape ",
                                            ShapeString(binding.shape), ") is missing from ",
                                            source.Origin(binding.name)));
  }
  if (*found != binding.shape) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", binding.name, " in ", source.Origin(binding.name), ": expected shape ",
        ShapeString(binding.shape), " from the model config, found ", ShapeString(*found)));
  }
  return absl::OkStatus();
}

// The parts re-homed, in order, into one new storage, back to back: the
// decode step then runs one GEMM over q/k/v (and over gate/up) through a
// view of the stack (decoder_layer.cc), with no second copy of the weights.
// Each part stays a tensor of its own (not a view), so training, optimisers
// and checkpoints see the same named parameters as before.
void PackRows(std::initializer_list<at::Tensor*> parts) {
  std::vector<at::Tensor> tensors;
  for (at::Tensor* part : parts) tensors.push_back(part->contiguous());
  const at::Tensor packed = at::cat(tensors, 0);
  int64_t offset = packed.storage_offset();
  for (at::Tensor* part : parts) {
    const std::vector<int64_t> sizes = part->sizes().vec();
    at::Tensor placed = at::empty({0}, packed.options());
    placed.set_(packed.storage(), offset, sizes);
    offset += part->numel();
    *part = std::move(placed);
  }
}

}  // namespace

DecoderVariant VariantOf(const ModelConfig& config) {
  DecoderVariant variant;
  const bool qwen2 = config.architecture == Architecture::kQwen2;
  variant.qkv_bias = qwen2 || config.attention_bias;
  variant.o_bias = !qwen2 && config.attention_bias;
  variant.qk_norm = config.architecture == Architecture::kQwen3 || config.qk_norm;
  return variant;
}

absl::StatusOr<ModelConfig> CheckDecoderConfig(ModelConfig c) {
  KF_RETURN_IF_ERROR(RequirePositive("vocab_size", c.vocab_size));
  KF_RETURN_IF_ERROR(RequirePositive("hidden_size", c.hidden_size));
  KF_RETURN_IF_ERROR(RequirePositive("intermediate_size", c.intermediate_size));
  KF_RETURN_IF_ERROR(RequirePositive("num_hidden_layers", c.num_hidden_layers));
  KF_RETURN_IF_ERROR(RequirePositive("num_attention_heads", c.num_attention_heads));
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  KF_RETURN_IF_ERROR(RequirePositive("num_key_value_heads", c.num_key_value_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: num_attention_heads ", c.num_attention_heads,
                     " is not a multiple of num_key_value_heads ", c.num_key_value_heads));
  }
  if (c.head_dim == 0 && c.hidden_size % c.num_attention_heads == 0) {
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  KF_RETURN_IF_ERROR(RequirePositive("head_dim", c.head_dim));
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: head_dim ", c.head_dim, " must be even for rotary embedding"));
  }
  if (!(c.rms_norm_eps > 0) || !(c.rope_theta > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("model config: rms_norm_eps ", c.rms_norm_eps,
                                                   " and rope_theta ", c.rope_theta,
                                                   " must be positive"));
  }
  KF_RETURN_IF_ERROR(CheckRopeScaling(c.rope_scaling));
  return c;
}

std::vector<WeightBinding> BindDecoderWeights(const ModelConfig& config, DecoderWeights* weights) {
  const DecoderVariant variant = VariantOf(config);
  std::vector<WeightBinding> out;
  weights->layers.resize(static_cast<size_t>(config.num_hidden_layers));
  Bind(&out, "model.embed_tokens.weight", {config.vocab_size, config.hidden_size},
       &weights->embed_tokens);
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    BindLayer(config, variant, i, &weights->layers[static_cast<size_t>(i)], &out);
  }
  Bind(&out, "model.norm.weight", {config.hidden_size}, &weights->norm);
  if (!config.tie_word_embeddings) {
    Bind(&out, "lm_head.weight", {config.vocab_size, config.hidden_size}, &weights->lm_head);
  }
  return out;
}

std::optional<std::vector<int64_t>> TensorMapSource::Shape(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return std::nullopt;
  return it->second.sizes().vec();
}

absl::StatusOr<at::Tensor> TensorMapSource::Load(const std::string& name,
                                                 const at::TensorOptions& options) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(absl::StrCat("tensor ", name));
  // copy=true: the model must not alias the caller's tensors.
  return TorchCall(absl::StrCat("loading ", name), [&] {
    return it->second.detach().to(options, /*non_blocking=*/false, /*copy=*/true);
  });
}

absl::StatusOr<DecoderWeights> LoadDecoderWeights(const ModelConfig& raw_config,
                                                  const WeightSource& source,
                                                  const at::TensorOptions& options) {
  KF_ASSIGN_OR_RETURN(const ModelConfig config, CheckDecoderConfig(raw_config));
  DecoderWeights weights;
  const std::vector<WeightBinding> bindings = BindDecoderWeights(config, &weights);
  // All shapes first, so a wrong checkpoint fails before gigabytes are copied.
  for (const WeightBinding& binding : bindings) {
    KF_RETURN_IF_ERROR(CheckPresentWithShape(binding, source));
  }
  for (const WeightBinding& binding : bindings) {
    KF_ASSIGN_OR_RETURN(*binding.tensor, source.Load(binding.name, options));
  }
  if (config.tie_word_embeddings) weights.lm_head = weights.embed_tokens;
  KF_RETURN_IF_ERROR(TorchCall("packing q/k/v and gate/up", [&] {
    for (LayerWeights& layer : weights.layers) {
      AttentionWeights& a = layer.attention;
      PackRows({&a.q_proj, &a.k_proj, &a.v_proj});
      if (a.q_bias.defined()) PackRows({&a.q_bias, &a.k_bias, &a.v_bias});
      PackRows({&layer.gate_proj, &layer.up_proj});
    }
    return absl::OkStatus();
  }));
  return weights;
}

bool FollowsInMemory(const at::Tensor& previous, const at::Tensor& next) {
  return previous.defined() && next.defined() &&
         next.storage().is_alias_of(previous.storage()) &&
         next.storage_offset() == previous.storage_offset() + previous.numel();
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace kforge
