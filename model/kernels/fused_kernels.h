// kforge's own CUDA kernels for the sampling path, as tensor operations:
// the decode step's RoPE plus KV-cache write, its attention over the cache,
// RMSNorm, SwiGLU's silu * up, and temperature sampling. Each replaces
// LibTorch kernels that are slower at decode shapes or several kernels whose
// fixed cost (microseconds each) dominates a decode step at batch sizes where
// the data is kilobytes (bench/RESULTS.md).
//
//   if (UseFusedKernels(x)) out = FusedSiluMul(gate, up);   // else at::silu(gate) * up
//
// They exist in builds with a CUDA LibTorch and nvcc (KFORGE_CUDA_KERNELS);
// elsewhere FusedKernelsAvailable() is false and each function throws. They
// have no autograd: callers use them without gradients only. Misuse (a
// device, dtype or shape they do not take) throws c10::Error naming the
// problem, as a LibTorch op would; so does a failed launch.
#ifndef KFORGE_MODEL_KERNELS_FUSED_KERNELS_H_
#define KFORGE_MODEL_KERNELS_FUSED_KERNELS_H_

#include <ATen/ATen.h>

namespace kforge {

// Whether this build has the kernels.
bool FusedKernelsAvailable();
// Whether work on `t` should use them: available, `t` on a CUDA device and
// not needing a gradient (the kernels have no backward).
bool UseFusedKernels(const at::Tensor& t);

// One decode token per row. q [N, H, 1, D] and k, v [N, KVH, 1, D] (views
// are fine: head_dim contiguous, any row and head strides) before RoPE;
// inv_freq float32 [D / 2]; positions, slots int64 [N]; keys, values one
// layer's cache [slots, KVH, max_len, D]. Rotates k and stores it and v at
// (slots[i], positions[i]); returns q rotated, [N, H, 1, D] contiguous.
at::Tensor FusedRopeStore(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& inv_freq, const at::Tensor& positions,
                          const at::Tensor& slots, const at::Tensor& keys,
                          const at::Tensor& values);

// Whether FusedDecodeAttention takes q [N, H, 1, D] over a cache of `keys`
// [slots, KVH, max_len, D]: kernels built, CUDA, bfloat16 or float16, D 64
// or 128, H a multiple of KVH and at most 16 query heads per kv head.
bool FusedDecodeAttentionSupports(const at::Tensor& q, const at::Tensor& keys);
// The same from the shapes alone: a model of this dtype, device and heads.
bool FusedDecodeAttentionTakes(at::ScalarType dtype, const at::Device& device, int64_t heads,
                               int64_t kv_heads, int64_t head_dim);
// Attention of one query token per row over its slot's cached keys: row i
// (q [N, H, 1, D], rotated; head_dim contiguous) attends keys and values
// 0..positions[i] of slot slots[i] of one layer's cache keys, values
// [slots, KVH, max_len, D], with scale 1/sqrt(D), as
// scaled_dot_product_attention with the ragged decode mask would.
// max_keys (host) bounds positions[i] + 1; it sizes the split of each row's
// keys over blocks, not what is read; `splits` > 0 overrides that choice
// (benchmarks sweep it). Returns [N, H, 1, D] contiguous.
at::Tensor FusedDecodeAttention(const at::Tensor& q, const at::Tensor& keys,
                                const at::Tensor& values, const at::Tensor& slots,
                                const at::Tensor& positions, int64_t max_keys, int splits = 0);

// FusedRopeStore and FusedDecodeAttention in one kernel: q [N, H, 1, D] and
// the new token's k, v [N, KVH, 1, D] come before RoPE (head_dim contiguous,
// any row and head strides); k is rotated and stored with v at
// (slots[i], positions[i]) of keys and values, and the attention reads it
// from the kernel's own registers there, so no other kernel runs between the
// projection and the attention. Same numerics as the two kernels.
at::Tensor FusedRopeDecodeAttention(const at::Tensor& q, const at::Tensor& k,
                                    const at::Tensor& v, const at::Tensor& inv_freq,
                                    const at::Tensor& keys, const at::Tensor& values,
                                    const at::Tensor& slots, const at::Tensor& positions,
                                    int64_t max_keys);

// Whether FusedRmsNorm takes x [..., C] (leading dims viewable as rows,
// C contiguous) with weight [C]: kernels built, CUDA, no gradient, one dtype.
bool FusedRmsNormSupports(const at::Tensor& x, const at::Tensor& weight);
// transformers' RMSNorm: weight * (x * rsqrt(mean(x^2) + eps)) in float32,
// rounded to x's dtype before and after the weight. Contiguous, x's shape.
// The weight is read while the kernel before it on the stream finishes
// (dependent_launch.cuh): that kernel must not write it.
at::Tensor FusedRmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);

// silu(gate) * up for gate, up [..., W] of one shape (views whose rows are
// evenly strided, such as the two halves of a fused gate/up projection).
// Returns a contiguous tensor of that shape.
at::Tensor FusedSiluMul(const at::Tensor& gate, const at::Tensor& up);

struct FusedDraws {
  at::Tensor tokens;    // int64 [B]
  at::Tensor logprobs;  // float32 [B]: log softmax(logits / T) at the token
};
// logits float32, bfloat16 or float16 [B, V] (V contiguous; rows may be
// strided, even stride 0), read in their own dtype; temperature
// and uniform float64 [B] (any stride), temperature > 0 and uniform in
// [0, 1). The token is the first whose cumulative probability exceeds
// uniform times the total.
FusedDraws FusedTemperedSample(const at::Tensor& logits, const at::Tensor& temperature,
                               const at::Tensor& uniform);

}  // namespace kforge

#endif  // KFORGE_MODEL_KERNELS_FUSED_KERNELS_H_
