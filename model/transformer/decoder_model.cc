#include "model/transformer/decoder_model.h"

#include <utility>

#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/kernels/fused_kernels.h"
#include "model/transformer/attention.h"
#include "model/transformer/int64_tensor.h"
#include "model/transformer/rope.h"
#include "model/transformer/torch_status.h"

namespace kforge {
namespace {

absl::Status CheckDtype(at::ScalarType dtype) {
  if (dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "decoder dtype ", c10::toString(dtype), " is not supported (float32, bfloat16, float16)"));
}


}  // namespace

absl::StatusOr<std::unique_ptr<DecoderModel>> DecoderModel::Create(
    const ModelConfig& raw_config, const WeightSource& source, const DecoderOptions& options) {
  KF_ASSIGN_OR_RETURN(ModelConfig config, CheckDecoderConfig(raw_config));
  KF_RETURN_IF_ERROR(CheckDtype(options.dtype));
  const at::TensorOptions tensor_options =
      at::TensorOptions().device(options.device).dtype(options.dtype);
  KF_ASSIGN_OR_RETURN(DecoderWeights weights,
                      LoadDecoderWeights(config, source, tensor_options));
  KF_ASSIGN_OR_RETURN(at::Tensor inv_freq, TorchCall("rotary frequencies", [&] {
                        return RopeInverseFrequencies(config).to(options.device);
                      }));
  return std::unique_ptr<DecoderModel>(new DecoderModel(
      std::move(config), options, std::move(weights), std::move(inv_freq)));
}

DecoderModel::DecoderModel(ModelConfig config, DecoderOptions options, DecoderWeights weights,
                           at::Tensor inv_freq)
    : config_(std::move(config)),
      options_(options),
      weights_(std::move(weights)),
      inv_freq_(std::move(inv_freq)) {}

at::Tensor DecoderModel::RunLayers(const at::Tensor& ids, const at::Tensor& positions,
                                   const AttendFn& attend, bool defer_rope) const {
  const RopeTables rope = defer_rope ? RopeTables{.deferred = true}
                                     : MakeRopeTables(inv_freq_, positions, options_.dtype);
  at::Tensor hidden = at::embedding(weights_.embed_tokens, ids);
  for (size_t i = 0; i < weights_.layers.size(); ++i) {
    hidden = DecoderLayerForward(config_, weights_.layers[i], static_cast<int64_t>(i),
                                 std::move(hidden), rope, attend);
  }
  return RmsNorm(hidden, weights_.norm, config_.rms_norm_eps);
}

absl::StatusOr<at::Tensor> DecoderModel::Forward(const at::Tensor& input_ids) const {
  KF_ASSIGN_OR_RETURN(at::Tensor hidden, ForwardHidden(input_ids));
  return TorchCall("decoder lm_head", [&] { return LmHead(hidden); });
}

at::Tensor DecoderModel::LmHead(const at::Tensor& hidden) const {
  return at::linear(hidden, weights_.lm_head);
}

absl::StatusOr<at::Tensor> DecoderModel::ForwardHidden(const at::Tensor& input_ids) const {
  if (!input_ids.defined() || input_ids.dim() != 2 || input_ids.size(1) == 0 ||
      !at::isIntegralType(input_ids.scalar_type(), /*includeBool=*/false)) {
    return absl::InvalidArgumentError(
        "decoder forward: input_ids must be a non-empty integer tensor [batch, tokens]");
  }
  return TorchCall("decoder forward", [&]() -> absl::StatusOr<at::Tensor> {
    // An out-of-range id would be a device-side assert on CUDA: check on the
    // host copy when there is one (no device sync), else on the device.
    const at::Tensor& checked = input_ids.is_cpu() ? input_ids : input_ids.to(options_.device);
    if (checked.lt(0).logical_or(checked.ge(config_.vocab_size)).any().item<bool>()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "decoder forward: input_ids outside [0, ", config_.vocab_size, ")"));
    }
    const at::Tensor ids = input_ids.to(options_.device, at::kLong);
    const at::Tensor positions =
        at::arange(ids.size(1), ids.options()).unsqueeze(0).expand_as(ids);
    const AttendFn attend = [](int64_t, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v) {
      return Attend(q, k, v, AttentionMask::Causal());
    };
    return RunLayers(ids, positions, attend);
  });
}

absl::StatusOr<std::unique_ptr<KvCache>> DecoderModel::NewKvCache(int64_t slots,
                                                                  int64_t max_len) const {
  KvCacheShape shape;
  shape.layers = config_.num_hidden_layers;
  shape.slots = slots;
  shape.kv_heads = config_.num_key_value_heads;
  shape.max_len = max_len;
  shape.head_dim = config_.head_dim;
  return KvCache::Create(shape,
                         at::TensorOptions().device(options_.device).dtype(options_.dtype));
}

absl::Status DecoderModel::CheckTokens(absl::Span<const int64_t> tokens) const {
  for (int64_t token : tokens) {
    if (token < 0 || token >= config_.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", token, " outside [0, ", config_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status DecoderModel::CheckCache(const KvCache& cache) const {
  const KvCacheShape& s = cache.shape();
  if (s.layers == config_.num_hidden_layers && s.kv_heads == config_.num_key_value_heads &&
      s.head_dim == config_.head_dim) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "kv cache of ", s.layers, " layers x ", s.kv_heads, " kv heads x head_dim ", s.head_dim,
      " does not fit this model (", config_.num_hidden_layers, " x ",
      config_.num_key_value_heads, " x ", config_.head_dim, ")"));
}

absl::StatusOr<at::Tensor> DecoderModel::Prefill(KvCache* cache, int64_t slot,
                                                 absl::Span<const int64_t> tokens) const {
  if (tokens.empty()) return absl::InvalidArgumentError("prefill: no tokens");
  KF_RETURN_IF_ERROR(CheckCache(*cache));
  KF_RETURN_IF_ERROR(CheckTokens(tokens));
  KF_RETURN_IF_ERROR(cache->CheckAppend(slot, static_cast<int64_t>(tokens.size())));
  const int64_t start = cache->length(slot);
  KF_ASSIGN_OR_RETURN(at::Tensor logits, TorchCall("prefill", [&] {
    c10::NoGradGuard no_grad;
    const at::Tensor ids = Int64Tensor(tokens, options_.device).unsqueeze(0);
    const at::Tensor positions = at::arange(start, start + ids.size(1), ids.options()).unsqueeze(0);
    const AttendFn attend = [&](int64_t layer, const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v) {
      return cache->AttendPrefill(layer, slot, q, k, v);
    };
    // Only the last position's logits are needed: skip lm_head for the rest.
    const at::Tensor last = RunLayers(ids, positions, attend).select(1, -1);
    return at::linear(last, weights_.lm_head).squeeze(0).to(at::kFloat);
  }));
  const int64_t slots[] = {slot};
  cache->Advance(slots, static_cast<int64_t>(tokens.size()));
  return logits;
}

absl::StatusOr<at::Tensor> DecoderModel::DecodeStep(KvCache* cache,
                                                    absl::Span<const int64_t> slots,
                                                    absl::Span<const int64_t> tokens) const {
  if (slots.size() != tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("decode step: ", slots.size(), " slots but ",
                                                   tokens.size(), " tokens"));
  }
  KF_RETURN_IF_ERROR(CheckCache(*cache));
  KF_RETURN_IF_ERROR(CheckTokens(tokens));
  // A decode step never builds an autograd graph, and NeedsDecodeMask must
  // see the step's own grad mode, not the caller's.
  c10::NoGradGuard no_grad;
  KF_ASSIGN_OR_RETURN(const KvCache::DecodeBatch batch,
                      cache->MakeDecodeBatch(slots, NeedsDecodeMask()));
  KF_ASSIGN_OR_RETURN(at::Tensor logits, TorchCall("decode step", [&] {
    return DecodeLogits(cache, batch, Int64Tensor(tokens, options_.device)).to(at::kFloat);
  }));
  cache->Advance(slots, 1);
  return logits;
}

at::Tensor DecoderModel::DecodeDense(KvCache* cache, const at::Tensor& ids,
                                     const at::Tensor& positions, int64_t span,
                                     const at::Tensor& logits_out) const {
  return DecodeLogits(cache, cache->DenseDecodeBatch(positions, span, NeedsDecodeMask()), ids,
                      logits_out);
}

bool DecoderModel::NeedsDecodeMask() const {
  // The one place that decides whether kforge's attention runs: it reads no
  // mask (building one is ~5 kernels a step), and DecodeLogits takes a batch
  // without one as the choice of it.
  const bool fused = FusedKernelsAvailable() && options_.device.is_cuda() &&
                     !at::GradMode::is_enabled() && options_.kforge_decode_attention;
  return !(fused && FusedDecodeAttentionTakes(options_.dtype, options_.device,
                                              config_.num_attention_heads,
                                              config_.num_key_value_heads, config_.head_dim));
}

at::Tensor DecoderModel::DecodeLogits(KvCache* cache, const KvCache::DecodeBatch& batch,
                                      const at::Tensor& ids, const at::Tensor& logits_out) const {
  if (logits_out.defined()) {
    TORCH_CHECK(logits_out.dim() == 2 && logits_out.size(0) == ids.size(0) &&
                    logits_out.size(1) == config_.vocab_size &&
                    logits_out.scalar_type() == options_.dtype && logits_out.is_contiguous() &&
                    logits_out.device() == ids.device(),
                "decode logits_out must be contiguous ", options_.dtype, " [", ids.size(0), ", ",
                config_.vocab_size, "] on ", ids.device(), ", got ", logits_out.scalar_type(),
                " ", logits_out.sizes(), " on ", logits_out.device());
  }
  // On CUDA with kforge's kernels, each layer's RoPE, cache write and
  // attention are one kernel inside AttendDecode (model/kernels/fused_kernels.h).
  const bool fused = UseFusedKernels(ids) && !at::GradMode::is_enabled();
  const at::Tensor rope_inv_freq = fused ? inv_freq_ : at::Tensor();
  // Chosen by NeedsDecodeMask when the batch was built.
  const bool kforge_attention = fused && !batch.mask.defined();
  const AttendFn attend = [&](int64_t layer, const at::Tensor& q, const at::Tensor& k,
                              const at::Tensor& v) {
    return cache->AttendDecode(layer, batch, q, k, v, rope_inv_freq, kforge_attention);
  };
  const at::Tensor hidden =
      RunLayers(ids.unsqueeze(1), batch.positions.unsqueeze(1), attend, /*defer_rope=*/fused);
  if (!logits_out.defined()) return at::linear(hidden.squeeze(1), weights_.lm_head);
  at::Tensor out = logits_out;  // a handle to the caller's buffer
  return at::mm_out(out, hidden.squeeze(1), weights_.lm_head.t());
}

std::vector<std::pair<std::string, at::Tensor>> DecoderModel::NamedParameters() {
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const WeightBinding& binding : BindDecoderWeights(config_, &weights_)) {
    named.emplace_back(binding.name, *binding.tensor);
  }
  return named;
}

}  // namespace kforge
