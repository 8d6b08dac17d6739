// One pre-norm decoder layer of Llama / Qwen2 / Qwen3, shared by the
// uncached forward, prefill and decode. What differs between those paths is
// where keys and values come from; the layer hands its freshly projected
// q, k, v to an AttendFn that stores them in a cache (or not) and attends.
//
//   hidden = DecoderLayerForward(config, weights.layers[i], i, hidden, rope, attend);
#ifndef KFORGE_MODEL_TRANSFORMER_DECODER_LAYER_H_
#define KFORGE_MODEL_TRANSFORMER_DECODER_LAYER_H_

#include <cstdint>
#include <functional>

#include <ATen/ATen.h>

#include "model/checkpoint/model_config.h"
#include "model/transformer/decoder_weights.h"
#include "model/transformer/rope.h"

namespace kforge {

// q [B, H, T, D]; k, v [B, KVH, T, D], RoPE applied unless the layer's
// RopeTables are `deferred`: then q and k come unrotated and the function
// rotates them (KvCache::AttendDecode, one kernel with the cache write).
// Returns [B, H, T, D].
using AttendFn = std::function<at::Tensor(int64_t layer, const at::Tensor& q,
                                          const at::Tensor& k, const at::Tensor& v)>;

// transformers' RMSNorm: normalise in float32, cast back, then scale by the
// weight in the activation dtype.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);

// hidden [B, T, hidden_size] -> the layer's output, same shape. Without
// autograd the output reuses hidden's storage (the residual stream is
// updated in place): callers pass a tensor they no longer need.
at::Tensor DecoderLayerForward(const ModelConfig& config, const LayerWeights& weights,
                               int64_t layer, at::Tensor hidden, const RopeTables& rope,
                               const AttendFn& attend);

}  // namespace kforge

#endif  // KFORGE_MODEL_TRANSFORMER_DECODER_LAYER_H_
