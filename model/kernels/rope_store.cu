// The decode step's rotary embedding and KV-cache write in one kernel: for
// each row (one token of one sequence) q and k are rotated and k, v stored at
// the row's slot and position. LibTorch ops spend ~10 kernels per layer on the
// same work (two RoPEs of three kernels, two index_put_ and their index
// preparation), and at decode batch sizes each of those is a few microseconds
// of fixed cost for kilobytes of data.
//
// Numerics follow transformers: angle = float(position) * inv_freq[i] in
// float32, cos and sin in float32 rounded to the element type, then
// out[i] = x[i] cos - x[i + D/2] sin and out[i + D/2] = x[i + D/2] cos +
// x[i] sin. transformers rounds after each product and the sum (three
// roundings in bf16); this rounds once, so it is within one unit in the last
// place of transformers' value and exact in float32 up to the FMA.
#include "model/kernels/element_type.cuh"
#include "model/kernels/kernel_launchers.h"

namespace kforge::cuda_kernels {
namespace {

constexpr int kThreads = 256;  // a warp per head, looping over heads

template <typename T>
__global__ void RopeStoreKernel(RopeStoreArgs a) {
  const int row = blockIdx.x;
  const int lane = threadIdx.x % 32;
  const int half = a.head_dim / 2;
  const int64_t position = a.positions[row];
  const int64_t slot = a.slots[row];
  const float angle_scale = static_cast<float>(position);
  const T* q = static_cast<const T*>(a.q) + row * a.q_row;
  const T* k = static_cast<const T*>(a.k) + row * a.k_row;
  const T* v = static_cast<const T*>(a.v) + row * a.v_row;
  T* q_out = static_cast<T*>(a.q_out) + static_cast<int64_t>(row) * a.heads * a.head_dim;
  const int64_t cache_offset = slot * a.cache_slot + position * a.cache_pos;
  T* keys = static_cast<T*>(a.keys) + cache_offset;
  T* values = static_cast<T*>(a.values) + cache_offset;

  const int total = a.heads + 2 * a.kv_heads;
  for (int h = threadIdx.x / 32; h < total; h += blockDim.x / 32) {
    if (h >= a.heads + a.kv_heads) {  // v: stored as it is
      const int head = h - a.heads - a.kv_heads;
      const T* src = v + head * a.v_head;
      T* dst = values + head * a.cache_head;
      for (int i = lane; i < a.head_dim; i += 32) dst[i] = src[i];
      continue;
    }
    const bool is_q = h < a.heads;
    const int head = is_q ? h : h - a.heads;
    const T* src = is_q ? q + head * a.q_head : k + head * a.k_head;
    T* dst = is_q ? q_out + head * a.head_dim : keys + head * a.cache_head;
    for (int i = lane; i < half; i += 32) {
      float sin_value, cos_value;
      sincosf(angle_scale * a.inv_freq[i], &sin_value, &cos_value);
      const float c = RoundTo<T>(cos_value);
      const float s = RoundTo<T>(sin_value);
      const float x1 = ToFloat(src[i]);
      const float x2 = ToFloat(src[i + half]);
      dst[i] = FromFloat<T>(x1 * c - x2 * s);
      dst[i + half] = FromFloat<T>(x2 * c + x1 * s);
    }
  }
}

}  // namespace

cudaError_t LaunchRopeStore(const RopeStoreArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  return DispatchElementType(args.type, [&]<typename T>() {
    RopeStoreKernel<T><<<args.rows, kThreads, 0, stream>>>(args);
    return cudaGetLastError();
  });
}

}  // namespace kforge::cuda_kernels
