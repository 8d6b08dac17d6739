// The plain C++ entry points of kforge's CUDA kernels (the .cu files beside
// this header): raw pointers, element strides and a stream. No LibTorch type
// appears here, so nvcc never compiles LibTorch's headers; fused_kernels.h is
// the tensor-level API over these, with the checks.
#ifndef KFORGE_MODEL_KERNELS_KERNEL_LAUNCHERS_H_
#define KFORGE_MODEL_KERNELS_KERNEL_LAUNCHERS_H_

#include <cstdint>

#include <cuda_runtime_api.h>

namespace kforge::cuda_kernels {

enum class ElementType { kFloat32, kBFloat16, kFloat16 };

// One decode token per row: q and k rotated (RoPE, rotate-half layout), k and
// v stored in the cache at the row's slot and position, q written out.
struct RopeStoreArgs {
  ElementType type = ElementType::kFloat32;
  int rows = 0, heads = 0, kv_heads = 0, head_dim = 0;
  // q [rows, heads, head_dim], k and v [rows, kv_heads, head_dim]: element
  // strides between rows and between heads; head_dim is contiguous.
  const void* q = nullptr;
  int64_t q_row = 0, q_head = 0;
  const void* k = nullptr;
  int64_t k_row = 0, k_head = 0;
  const void* v = nullptr;
  int64_t v_row = 0, v_head = 0;
  const float* inv_freq = nullptr;   // [head_dim / 2]
  const int64_t* positions = nullptr;  // [rows]
  const int64_t* slots = nullptr;      // [rows]
  void* q_out = nullptr;               // [rows, heads, head_dim], contiguous
  // One layer's cache, [slots, kv_heads, max_len, head_dim] with these
  // element strides (keys and values alike).
  void* keys = nullptr;
  void* values = nullptr;
  int64_t cache_slot = 0, cache_head = 0, cache_pos = 0;
};
cudaError_t LaunchRopeStore(const RopeStoreArgs& args, cudaStream_t stream);

// out = silu(gate) * up, rounded to the element type after the silu as two
// LibTorch ops would.
struct SiluMulArgs {
  ElementType type = ElementType::kFloat32;
  int64_t rows = 0, width = 0;
  const void* gate = nullptr;  // [rows, width], row stride gate_row
  int64_t gate_row = 0;
  const void* up = nullptr;  // [rows, width], row stride up_row
  int64_t up_row = 0;
  void* out = nullptr;  // [rows, width], contiguous
};
cudaError_t LaunchSiluMul(const SiluMulArgs& args, cudaStream_t stream);

// One token per row from softmax(logits / T), by inverse CDF at the row's
// uniform draw; its log-probability under that distribution.
struct TemperedSampleArgs {
  ElementType type = ElementType::kFloat32;
  int64_t rows = 0, vocab = 0;
  const void* logits = nullptr;  // [rows, vocab], row stride logits_row (0: one row for all)
  int64_t logits_row = 0;
  const double* temperature = nullptr;  // [rows], stride temperature_stride
  int64_t temperature_stride = 1;
  const double* uniform = nullptr;  // [rows] in [0, 1), stride uniform_stride
  int64_t uniform_stride = 1;
  // Scratch of TemperedSamplePartialFloats(rows, vocab) floats: each chunk's
  // softmax partial, between the launch's two kernels.
  float* partials = nullptr;
  int64_t* tokens = nullptr;  // [rows]
  float* logprobs = nullptr;  // [rows]
};
int64_t TemperedSamplePartialFloats(int64_t rows, int64_t vocab);
cudaError_t LaunchTemperedSample(const TemperedSampleArgs& args, cudaStream_t stream);

// Attention of one query token per row over that row's cached keys and
// values 0..positions[row] (decode_attention.cu). The query heads of a kv
// head are consecutive (heads / kv_heads of them, grouped-query attention).
struct DecodeAttentionArgs {
  ElementType type = ElementType::kBFloat16;
  int rows = 0, heads = 0, kv_heads = 0, head_dim = 0;
  // Blocks per (row, kv head): DecodeAttentionSplits. With more than one,
  // partial_out [rows, heads, splits, head_dim] and partial_lse [rows,
  // heads, splits] (float32) hold each split's result until they merge.
  int splits = 1;
  float* partial_out = nullptr;
  float* partial_lse = nullptr;
  // q [rows, heads, head_dim] with these element strides; head_dim contiguous.
  const void* q = nullptr;
  int64_t q_row = 0, q_head = 0;
  // One layer's cache as in RopeStoreArgs.
  void* keys = nullptr;
  void* values = nullptr;
  int64_t cache_slot = 0, cache_head = 0, cache_pos = 0;
  const int64_t* slots = nullptr;      // [rows]
  const int64_t* positions = nullptr;  // [rows]: the row's last key
  float scale = 0.f;                   // applied to q . k
  void* out = nullptr;                 // [rows, heads, head_dim], contiguous
  // With inv_freq ([head_dim / 2]), q comes before RoPE, and the row's new
  // key and value, k and v [rows, kv_heads, head_dim] (these strides), are
  // rotated and stored at its position as RopeStoreArgs does, in the same
  // kernel: the cache there is then written, not read.
  const float* inv_freq = nullptr;
  const void* k = nullptr;
  int64_t k_row = 0, k_head = 0;
  const void* v = nullptr;
  int64_t v_row = 0, v_head = 0;
};
// Whether the kernel takes this shape: bfloat16 or float16, head_dim 64 or
// 128, at most 16 query heads per kv head.
bool DecodeAttentionSupports(ElementType type, int heads, int kv_heads, int head_dim);
// The splits that fill the multiprocessors once for the rows, heads,
// head_dim and type of `shape` whose lengths are at most `max_keys`.
int DecodeAttentionSplits(const DecodeAttentionArgs& shape, int64_t max_keys,
                          int multiprocessors);
cudaError_t LaunchDecodeAttention(const DecodeAttentionArgs& args, cudaStream_t stream);

// transformers' RMSNorm of each row: weight * (x * rsqrt(mean(x^2) + eps))
// in float32, rounded to the element type before and after the weight.
struct RmsNormArgs {
  ElementType type = ElementType::kFloat32;
  int64_t rows = 0, width = 0;
  const void* x = nullptr;       // [rows, width], row stride x_row, width contiguous
  int64_t x_row = 0;
  const void* weight = nullptr;  // [width]
  float eps = 0.f;
  void* out = nullptr;           // [rows, width], contiguous
};
cudaError_t LaunchRmsNorm(const RmsNormArgs& args, cudaStream_t stream);

}  // namespace kforge::cuda_kernels

#endif  // KFORGE_MODEL_KERNELS_KERNEL_LAUNCHERS_H_
