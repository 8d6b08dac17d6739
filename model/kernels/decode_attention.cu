// Attention of one query token per sequence over its cached keys (a decode
// step), split over chunks of keys ("flash decoding"): a block per (row, kv
// head, chunk) computes the softmax-weighted values of its chunk for every
// query head sharing that kv head (grouped-query attention reads each key
// once), and a second kernel merges the chunks by their maxima and sums.
//
// Why not LibTorch's scaled_dot_product_attention: at decode shapes its
// cuDNN kernel is preceded by a memset and a ~7 us gap per layer inside the
// graph (nsys on an H100, bench/RESULTS.md), it needs a [N, 1, 1, span] mask
// for the ragged lengths, and reads the span's padding keys; this reads keys
// 0..positions[i] of each row and nothing else.
//
// Numerics: q * scale and k in float32, scores and the online softmax in
// float32, values accumulated in float32, rounded once to the element type.
#include <cfloat>

#include "model/kernels/element_type.cuh"
#include "model/kernels/kernel_launchers.h"

namespace kforge::cuda_kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;
constexpr unsigned kAllLanes = 0xffffffffu;

// E: head dims per lane (head_dim <= 32 E); R: the most query heads per kv
// head this instance serves.
template <typename T, int E, int R>
__global__ void __launch_bounds__(kWarps * 32) DecodeAttentionChunkKernel(DecodeAttentionArgs a) {
  const int row = blockIdx.x, group = blockIdx.y, chunk = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int dim = a.head_dim, rep = a.heads / a.kv_heads;
  const int64_t length = a.positions[row] + 1;
  const int64_t begin = static_cast<int64_t>(chunk) * a.chunk;
  const int64_t end = begin + a.chunk < length ? begin + a.chunk : length;
  const int d0 = lane * E;

  const T* q = static_cast<const T*>(a.q) +
               (static_cast<int64_t>(row) * a.heads + static_cast<int64_t>(group) * rep) * dim;
  float query[R][E];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      query[r][e] = (r < rep && d0 + e < dim) ? ToFloat(q[r * dim + d0 + e]) * a.scale : 0.0f;
    }
  }
  float top[R], mass[R], acc[R][E];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    top[r] = -FLT_MAX;
    mass[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[r][e] = 0.0f;
  }
  const int64_t cache_offset = a.slots[row] * a.cache_slot + group * a.cache_head;
  const T* keys = static_cast<const T*>(a.keys) + cache_offset;
  const T* values = static_cast<const T*>(a.values) + cache_offset;
  // kUnroll keys per warp per step, loaded before any is used: the loads of
  // a warp are then in flight together, which is what keeps memory busy.
  for (int64_t first = begin + warp; first < end; first += kWarps * kUnroll) {
    float k[kUnroll][E], v[kUnroll][E];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = first + u * kWarps;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const bool inside = j < end && d0 + e < dim;
        k[u][e] = inside ? ToFloat(keys[j * a.cache_pos + d0 + e]) : 0.0f;
        v[u][e] = inside ? ToFloat(values[j * a.cache_pos + d0 + e]) : 0.0f;
      }
    }
    // Straight-line over keys and query heads (no early exit): the R
    // reductions are independent chains the scheduler interleaves. A key
    // past the chunk weighs 0; a padding head (r >= rep) has q = 0 and is
    // never written out.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const bool valid = first + u * kWarps < end;
      float score[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        score[r] = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) score[r] += query[r][e] * k[u][e];
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
#pragma unroll
        for (int r = 0; r < R; ++r) score[r] += __shfl_xor_sync(kAllLanes, score[r], offset);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float new_top = valid ? fmaxf(top[r], score[r]) : top[r];
        const float keep = expf(top[r] - new_top);
        const float weight = valid ? expf(score[r] - new_top) : 0.0f;
        mass[r] = mass[r] * keep + weight;
#pragma unroll
        for (int e = 0; e < E; ++e) acc[r][e] = acc[r][e] * keep + weight * v[u][e];
        top[r] = new_top;
      }
    }
  }

  // Merge the warps, then write this chunk's partial result.
  __shared__ float warp_top[kWarps][R], warp_mass[kWarps][R];
  __shared__ float warp_acc[kWarps][R][32 * E];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (lane == 0) {
      warp_top[warp][r] = top[r];
      warp_mass[warp][r] = mass[r];
    }
#pragma unroll
    for (int e = 0; e < E; ++e) warp_acc[warp][r][d0 + e] = acc[r][e];
  }
  __syncthreads();
  const int64_t splits = gridDim.z;
  for (int index = threadIdx.x; index < rep * dim; index += blockDim.x) {
    const int r = index / dim, d = index % dim;
    float best = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w) best = fmaxf(best, warp_top[w][r]);
    float total = 0.0f, out = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float scale = warp_mass[w][r] > 0.0f ? expf(warp_top[w][r] - best) : 0.0f;
      total += warp_mass[w][r] * scale;
      out += warp_acc[w][r][d] * scale;
    }
    const int64_t head = static_cast<int64_t>(row) * a.heads + group * rep + r;
    a.partial_out[(head * splits + chunk) * dim + d] = out;
    if (d == 0) {
      a.partial_top[head * splits + chunk] = best;
      a.partial_mass[head * splits + chunk] = total;
    }
  }
}

template <typename T>
__global__ void DecodeAttentionMergeKernel(DecodeAttentionArgs a, int splits) {
  const int64_t head = static_cast<int64_t>(blockIdx.x) * a.heads + blockIdx.y;
  const float* top = a.partial_top + head * splits;
  const float* mass = a.partial_mass + head * splits;
  float best = -FLT_MAX;
  for (int s = 0; s < splits; ++s) {
    if (mass[s] > 0.0f) best = fmaxf(best, top[s]);
  }
  for (int d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
    float total = 0.0f, out = 0.0f;
    for (int s = 0; s < splits; ++s) {
      if (mass[s] <= 0.0f) continue;  // a chunk past the row's length
      const float scale = expf(top[s] - best);
      total += mass[s] * scale;
      out += a.partial_out[(head * splits + s) * a.head_dim + d] * scale;
    }
    static_cast<T*>(a.out)[head * a.head_dim + d] = FromFloat<T>(out / total);
  }
}

template <typename T, int E, int R>
cudaError_t Launch(const DecodeAttentionArgs& a, cudaStream_t stream) {
  const dim3 chunks(a.rows, a.kv_heads, a.splits);
  DecodeAttentionChunkKernel<T, E, R><<<chunks, kWarps * 32, 0, stream>>>(a);
  const dim3 heads(a.rows, a.heads);
  DecodeAttentionMergeKernel<T><<<heads, a.head_dim < 128 ? 32 : 128, 0, stream>>>(a, a.splits);
  return cudaGetLastError();
}

template <typename T, int E>
cudaError_t LaunchForRep(const DecodeAttentionArgs& a, cudaStream_t stream) {
  const int rep = a.heads / a.kv_heads;
  if (rep <= 1) return Launch<T, E, 1>(a, stream);
  if (rep <= 2) return Launch<T, E, 2>(a, stream);
  if (rep <= 4) return Launch<T, E, 4>(a, stream);
  if (rep <= 8) return Launch<T, E, 8>(a, stream);
  if constexpr (E <= 4) {
    if (rep <= 16) return Launch<T, E, 16>(a, stream);
  }
  return cudaErrorInvalidConfiguration;
}

}  // namespace

bool DecodeAttentionSupports(int heads, int kv_heads, int head_dim) {
  if (kv_heads <= 0 || heads % kv_heads != 0 || head_dim <= 0 || head_dim > 256) return false;
  const int rep = heads / kv_heads;
  return rep <= (head_dim <= 128 ? 16 : 8);
}

cudaError_t LaunchDecodeAttention(const DecodeAttentionArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  if (!DecodeAttentionSupports(args.heads, args.kv_heads, args.head_dim) || args.splits <= 0 ||
      args.chunk <= 0) {
    return cudaErrorInvalidValue;
  }
  return DispatchElementType(args.type, [&]<typename T>() {
    if (args.head_dim <= 32) return LaunchForRep<T, 1>(args, stream);
    if (args.head_dim <= 64) return LaunchForRep<T, 2>(args, stream);
    if (args.head_dim <= 128) return LaunchForRep<T, 4>(args, stream);
    return LaunchForRep<T, 8>(args, stream);
  });
}

}  // namespace kforge::cuda_kernels
