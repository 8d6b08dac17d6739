// The decoder of Hugging Face Llama, Qwen2 and Qwen3 checkpoints on
// LibTorch: token embedding, pre-norm layers (grouped-query attention with
// rotary embedding, SwiGLU MLP), final RMSNorm and lm_head (tied to the
// embedding when the config says so). Numerics follow transformers: RMSNorm
// and rotary tables in float32, attention softmax in float32.
//
// Two ways to run it:
//  * Forward(input_ids [B, T]) -> logits [B, T, V]: the whole sequence, no
//    cache, autograd on (the learner's log-probabilities).
//  * Prefill / DecodeStep over a KvCache: generation, under NoGradGuard.
//
//   absl::StatusOr<std::unique_ptr<DecoderModel>> model = DecoderModel::Create(
//       config, TensorMapSource(std::move(tensors)), {at::kCUDA, at::kBFloat16});
//   std::unique_ptr<KvCache> cache = *(*model)->NewKvCache(16, 2048);
//   int64_t slot = *cache->Allocate();
//   at::Tensor logits = *(*model)->Prefill(cache.get(), slot, prompt);  // [V], float32
//
// To load a checkpoint directory see checkpoint_loader.h. Methods are const
// and may run concurrently on different caches; weight updates (through
// NamedParameters) must not overlap a forward.
#ifndef KFORGE_MODEL_TRANSFORMER_DECODER_MODEL_H_
#define KFORGE_MODEL_TRANSFORMER_DECODER_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/checkpoint/model_config.h"
#include "model/transformer/decoder_layer.h"
#include "model/transformer/decoder_weights.h"
#include "model/transformer/kv_cache.h"

namespace kforge {

struct DecoderOptions {
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;  // kFloat, kBFloat16 or kHalf
  // Decode steps attend with kforge's kernel where it applies (CUDA,
  // bfloat16 or float16, no gradient; FusedDecodeAttention in
  // model/kernels/fused_kernels.h); false, or elsewhere: LibTorch's
  // scaled_dot_product_attention with the ragged mask. For comparisons.
  bool kforge_decode_attention = true;
};

class DecoderModel {
 public:
  // Checks the config, then loads every weight it implies from `weights`
  // straight onto options.device in options.dtype.
  static absl::StatusOr<std::unique_ptr<DecoderModel>> Create(const ModelConfig& config,
                                                              const WeightSource& weights,
                                                              const DecoderOptions& options);

  // input_ids: integer [B, T], any device. Rows shorter than T are padded on
  // the right (the padding's own logits are meaningless; earlier positions
  // never see it). Returns logits [B, T, V] in the model dtype, on the model
  // device, connected to the autograd graph of the weights.
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& input_ids) const;

  // Forward without the lm_head: the final-normed hidden states [B, T, C].
  // Training needs logits only at completion positions; applying LmHead to
  // those alone saves the [B, T, V] logits of the prompt.
  absl::StatusOr<at::Tensor> ForwardHidden(const at::Tensor& input_ids) const;
  // hidden [..., C] -> logits [..., V] in the model dtype.
  at::Tensor LmHead(const at::Tensor& hidden) const;

  // An empty cache shaped for this model, on its device and dtype.
  absl::StatusOr<std::unique_ptr<KvCache>> NewKvCache(int64_t slots, int64_t max_len) const;

  // Appends `tokens` to `slot` (from its current length: 0 for a fresh slot)
  // and returns the logits after the last one: float32 [V].
  absl::StatusOr<at::Tensor> Prefill(KvCache* cache, int64_t slot,
                                     absl::Span<const int64_t> tokens) const;

  // Appends tokens[i] to slots[i] (distinct, each at its own length) and
  // returns their next-token logits: float32 [N, V], row i for slots[i].
  absl::StatusOr<at::Tensor> DecodeStep(KvCache* cache, absl::Span<const int64_t> slots,
                                        absl::Span<const int64_t> tokens) const;

  // A decode step over slots 0..N-1 of `cache` from device inputs: ids and
  // positions int64 [N] on the model's device, keys 0..span-1 read. Returns
  // logits [N, V] in the model's dtype: in logits_out when given (contiguous
  // [N, V] of that dtype on the device; the lm_head GEMM writes there, as a
  // CUDA graph's output buffer wants, instead of a copy of ~20 MB a step).
  // Device work only, with no checks and no host synchronisation, so a CUDA
  // graph can capture it (see model/generation/dense_decoder.h); the caller
  // checks the slots (KvCache::CheckDecode) and advances the cache. Throws
  // c10::Error.
  at::Tensor DecodeDense(KvCache* cache, const at::Tensor& ids, const at::Tensor& positions,
                         int64_t span, const at::Tensor& logits_out = at::Tensor()) const;

  // The weights under their Hugging Face names, aliasing the model's storage:
  // set requires_grad for training, copy_ into them to update the model. A
  // tied lm_head is listed once, as model.embed_tokens.weight.
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters();

  // INVALID_ARGUMENT naming the first id outside [0, vocab_size).
  absl::Status CheckTokens(absl::Span<const int64_t> tokens) const;

  const ModelConfig& config() const { return config_; }
  const DecoderOptions& options() const { return options_; }

 private:
  DecoderModel(ModelConfig config, DecoderOptions options, DecoderWeights weights,
               at::Tensor inv_freq);

  absl::Status CheckCache(const KvCache& cache) const;
  // One token per row of `batch` (ids int64 [N] on the device) -> next-token
  // logits [N, V] in the model's dtype (into logits_out when defined); stores
  // the rows' keys and values in `cache`.
  at::Tensor DecodeLogits(KvCache* cache, const KvCache::DecodeBatch& batch,
                          const at::Tensor& ids,
                          const at::Tensor& logits_out = at::Tensor()) const;
  // Whether a decode step attends with SDPA, which needs the ragged mask.
  bool NeedsDecodeMask() const;
  // ids and positions int64 [B, T] on the device -> final-normed hidden [B, T, C].
  // defer_rope: q and k reach `attend` unrotated (see RopeTables::deferred).
  at::Tensor RunLayers(const at::Tensor& ids, const at::Tensor& positions, const AttendFn& attend,
                       bool defer_rope = false) const;

  ModelConfig config_;
  DecoderOptions options_;
  DecoderWeights weights_;
  at::Tensor inv_freq_;  // float32 [head_dim / 2] on the device
};

}  // namespace kforge

#endif  // KFORGE_MODEL_TRANSFORMER_DECODER_MODEL_H_
