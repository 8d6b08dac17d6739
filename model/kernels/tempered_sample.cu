// Temperature sampling of one token per row, for rows that keep the whole
// vocabulary (no top-k or top-p), in two kernels over chunks of kChunk
// tokens, reading the logits in the model's dtype:
//   1. ChunkPartialsKernel, a block per (row, chunk): the chunk's
//      m_c = max(z / T) and s_c = sum exp(z / T - m_c), in float32 (one read
//      of the chunk, held in registers; z / T is z times the float 1 / T);
//   2. DrawKernel, a block per row: m = max m_c, s = sum s_c exp(m_c - m),
//      log p_v = (z_v / T - m) - log s (float32, as at::log_softmax);
//      the chunk weights W_c = s_c exp(m_c - m) summed in double; the chunk
//      where the running weight first exceeds u * sum W, and the fraction f
//      of its weight below that point; then, in that chunk only, a
//      block-wide scan of w_v = exp(z_v / T - m_c) in double finds the first
//      token whose running sum exceeds f * sum w: the inverse CDF at u.
// The law is softmax(z / T); a chunk's weight and the sum of its w_v agree to
// float32 rounding, so a draw within rounding of a CDF step may differ from
// the LibTorch path's (token_sampler.cc) by a neighbouring token.
//
// One block per row used to do all of this (three passes over the row): at
// batch 64, 64 blocks left half of an H100's multiprocessors idle and a step
// spent ~0.13 ms here, plus ~0.02 ms converting bf16 logits to float32.
#include <cfloat>
#include <climits>
#include <cstdint>

#include "model/kernels/dependent_launch.cuh"
#include "model/kernels/element_type.cuh"
#include "model/kernels/kernel_launchers.h"

namespace kforge::cuda_kernels {
namespace {

constexpr int kDrawThreads = 1024;
constexpr int kDrawWarps = kDrawThreads / 32;
constexpr int kItems = 8;  // consecutive tokens per thread in the draw's scan
constexpr int64_t kChunk = int64_t{kDrawThreads} * kItems;
constexpr int kPartialThreads = 256;
constexpr int kPartialWarps = kPartialThreads / 32;
constexpr unsigned kAllLanes = 0xffffffffu;

// The running maximum m of the values seen and s = sum exp(value - m).
struct SoftmaxPartial {
  float max = -FLT_MAX;
  float sum = 0.f;

  __device__ void Take(float x) {
    if (x > max) {
      sum = sum * expf(max - x) + 1.f;
      max = x;
    } else {
      sum += expf(x - max);
    }
  }
  __device__ void Merge(SoftmaxPartial other) {
    const float merged = fmaxf(max, other.max);
    sum = sum * expf(max - merged) + other.sum * expf(other.max - merged);
    max = merged;
  }
};

template <typename T, bool kVector>
__global__ void __launch_bounds__(kPartialThreads)
    ChunkPartialsKernel(TemperedSampleArgs a, int64_t chunks) {
  constexpr int kVec = kVector ? 16 / sizeof(T) : 1;
  struct alignas(kVec * sizeof(T)) Piece {
    T v[kVec];
  };
  __shared__ SoftmaxPartial warp_partials[kPartialWarps];
  WaitForPreviousKernel();
  const int64_t row = blockIdx.x, chunk = blockIdx.y;
  const T* z = static_cast<const T*>(a.logits) + row * a.logits_row;
  // The temperature column cast to float as the LibTorch path casts it; z / T
  // as z times the float reciprocal (within an ulp of the division, and the
  // same in both kernels: a division per token made this kernel
  // instruction-bound).
  const float inverse_t = 1.f / static_cast<float>(a.temperature[row * a.temperature_stride]);
  const int64_t start = chunk * kChunk;
  const int64_t end = start + kChunk < a.vocab ? start + kChunk : a.vocab;

  // Every piece of the thread's share in flight at once (kPieces loads, then
  // the arithmetic): one load at a time left the kernel latency-bound.
  constexpr int kPieces = kChunk / (kPartialThreads * kVec);
  const int64_t pieces = (end - start) / kVec;
  const Piece* piece = reinterpret_cast<const Piece*>(z + start);
  Piece held[kPieces];
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    const int64_t at = threadIdx.x + int64_t{i} * kPartialThreads;
    if (at < pieces) held[i] = piece[at];
  }
  SoftmaxPartial partial;
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    if (threadIdx.x + int64_t{i} * kPartialThreads >= pieces) continue;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      partial.max = fmaxf(partial.max, ToFloat(held[i].v[j]) * inverse_t);
    }
  }
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    if (threadIdx.x + int64_t{i} * kPartialThreads >= pieces) continue;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      partial.sum += expf(ToFloat(held[i].v[j]) * inverse_t - partial.max);
    }
  }
  // The chunk's last tokens when its length is not a multiple of kVec.
  for (int64_t v = start + pieces * kVec + threadIdx.x; v < end; v += kPartialThreads) {
    partial.Take(ToFloat(z[v]) * inverse_t);
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    SoftmaxPartial other;
    other.max = __shfl_xor_sync(kAllLanes, partial.max, offset);
    other.sum = __shfl_xor_sync(kAllLanes, partial.sum, offset);
    partial.Merge(other);
  }
  if (threadIdx.x % 32 == 0) warp_partials[threadIdx.x / 32] = partial;
  __syncthreads();
  if (threadIdx.x == 0) {
    SoftmaxPartial block = warp_partials[0];
    for (int w = 1; w < kPartialWarps; ++w) block.Merge(warp_partials[w]);
    float* out = a.partials + 2 * (row * chunks + chunk);
    out[0] = block.max;
    out[1] = block.sum;
  }
}

// The sum of the values of the lanes before this one in its warp, and
// (inclusive) with its own.
struct WarpPrefix {
  double exclusive, inclusive;
};
__device__ WarpPrefix WarpPrefixSum(double value) {
  const int lane = threadIdx.x % 32;
  double inclusive = value;
  for (int offset = 1; offset < 32; offset *= 2) {
    const double before = __shfl_up_sync(kAllLanes, inclusive, offset);
    if (lane >= offset) inclusive += before;
  }
  double exclusive = __shfl_up_sync(kAllLanes, inclusive, 1);
  if (lane == 0) exclusive = 0;
  return {exclusive, inclusive};
}

// The sum of the values of the threads before this one, and the block's
// total. scratch holds kDrawWarps + 1 values.
struct BlockPrefix {
  double exclusive, total;
};
__device__ BlockPrefix BlockExclusiveSum(double value, double* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const WarpPrefix in_warp = WarpPrefixSum(value);
  if (lane == 31) scratch[warp] = in_warp.inclusive;
  __syncthreads();
  if (warp == 0) {
    const WarpPrefix warps = WarpPrefixSum(scratch[lane]);  // kDrawWarps == 32
    scratch[lane] = warps.exclusive;
    if (lane == 31) scratch[kDrawWarps] = warps.inclusive;
  }
  __syncthreads();
  return {scratch[warp] + in_warp.exclusive, scratch[kDrawWarps]};
}

template <typename T>
__global__ void __launch_bounds__(kDrawThreads) DrawKernel(TemperedSampleArgs a, int64_t chunks) {
  __shared__ double scratch[kDrawWarps + 1];
  __shared__ int64_t chosen_chunk;
  __shared__ float chunk_max, row_max, log_sum;
  __shared__ double fraction;
  __shared__ unsigned long long first_above, last_positive;
  WaitForPreviousKernel();

  const int64_t row = blockIdx.x;
  const T* z = static_cast<const T*>(a.logits) + row * a.logits_row;
  const float inverse_t = 1.f / static_cast<float>(a.temperature[row * a.temperature_stride]);
  const float* partials = a.partials + 2 * row * chunks;
  const int tid = threadIdx.x, lane = tid % 32;

  // Warp 0 merges the chunk partials, 32 chunks at a time, and picks the chunk.
  if (tid < 32) {
    float m = -FLT_MAX;
    for (int64_t c = lane; c < chunks; c += 32) m = fmaxf(m, partials[2 * c]);
    for (int offset = 16; offset > 0; offset /= 2) {
      m = fmaxf(m, __shfl_xor_sync(kAllLanes, m, offset));
    }
    // W_c = s_c exp(m_c - m), the same float product for the total, the
    // selection and s.
    const auto weight_of = [&](int64_t c) {
      return c < chunks ? partials[2 * c + 1] * expf(partials[2 * c] - m) : 0.f;
    };
    float s = 0.f;
    double total = 0;
    for (int64_t c = lane; c < chunks; c += 32) {
      const float w = weight_of(c);
      s += w;
      total += w;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      s += __shfl_xor_sync(kAllLanes, s, offset);
      total += __shfl_xor_sync(kAllLanes, total, offset);
    }
    const double target = a.uniform[row * a.uniform_stride] * total;
    // The first chunk whose running weight exceeds the target; the last chunk
    // with weight guards against a target at or past the end (rounding only:
    // u < 1).
    double running = 0, before = 0, weight = 0;
    int64_t chosen = -1, last = 0;
    double last_before = 0, last_weight = 0;
    for (int64_t first = 0; first < chunks && chosen < 0; first += 32) {
      const double w = weight_of(first + lane);
      const WarpPrefix prefix = WarpPrefixSum(w);
      const unsigned above = __ballot_sync(kAllLanes, w > 0 && running + prefix.inclusive > target);
      const unsigned positive = __ballot_sync(kAllLanes, w > 0);
      if (above != 0) {
        const int at = __ffs(above) - 1;
        chosen = first + at;
        before = running + __shfl_sync(kAllLanes, prefix.exclusive, at);
        weight = __shfl_sync(kAllLanes, w, at);
      }
      if (positive != 0) {
        const int at = 31 - __clz(positive);
        last = first + at;
        last_before = running + __shfl_sync(kAllLanes, prefix.exclusive, at);
        last_weight = __shfl_sync(kAllLanes, w, at);
      }
      running += __shfl_sync(kAllLanes, prefix.inclusive, 31);
    }
    if (chosen < 0) {
      chosen = last;
      before = last_before;
      weight = last_weight;
    }
    if (lane == 0) {
      const double f = weight > 0 ? (target - before) / weight : 0;
      fraction = f < 0 ? 0 : f;
      chosen_chunk = chosen;
      chunk_max = partials[2 * chosen];
      row_max = m;
      log_sum = logf(s);
      first_above = ULLONG_MAX;
      last_positive = 0;
    }
  }
  __syncthreads();

  const int64_t first = chosen_chunk * kChunk + int64_t{tid} * kItems;
  double w[kItems];
  double local = 0;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int64_t v = first + j;
    w[j] = v < a.vocab ? static_cast<double>(expf(ToFloat(z[v]) * inverse_t - chunk_max)) : 0.0;
    local += w[j];
  }
  const BlockPrefix prefix = BlockExclusiveSum(local, scratch);
  const double target = fraction * prefix.total;
  double running = prefix.exclusive;
  for (int j = 0; j < kItems; ++j) {
    if (w[j] <= 0) continue;
    running += w[j];
    const auto token = static_cast<unsigned long long>(first + j);
    atomicMax(&last_positive, token);
    if (running > target) {
      atomicMin(&first_above, token);
      break;
    }
  }
  __syncthreads();
  if (tid == 0) {
    const int64_t token =
        static_cast<int64_t>(first_above != ULLONG_MAX ? first_above : last_positive);
    a.tokens[row] = token;
    a.logprobs[row] = (ToFloat(z[token]) * inverse_t - row_max) - log_sum;
  }
}

int64_t Chunks(int64_t vocab) { return (vocab + kChunk - 1) / kChunk; }

}  // namespace

int64_t TemperedSamplePartialFloats(int64_t rows, int64_t vocab) {
  return 2 * rows * Chunks(vocab);
}

cudaError_t LaunchTemperedSample(const TemperedSampleArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  const int64_t chunks = Chunks(args.vocab);
  // Rows in x (up to 2^31 - 1: the distribution tests draw 200,000 rows),
  // chunks in y (up to 65535: a vocabulary of 536M).
  if (args.rows > INT_MAX || chunks > 65535) return cudaErrorInvalidValue;
  return DispatchElementType(args.type, [&]<typename T>() {
    constexpr int64_t kVec = 16 / sizeof(T);
    const bool vector =
        reinterpret_cast<uintptr_t>(args.logits) % 16 == 0 && args.logits_row % kVec == 0;
    const dim3 grid(static_cast<unsigned>(args.rows), static_cast<unsigned>(chunks));
    const cudaError_t partials = vector ? LaunchDependent<ChunkPartialsKernel<T, true>>(
                                              grid, kPartialThreads, 0, stream, args, chunks)
                                        : LaunchDependent<ChunkPartialsKernel<T, false>>(
                                              grid, kPartialThreads, 0, stream, args, chunks);
    if (partials != cudaSuccess) return partials;
    return LaunchDependent<DrawKernel<T>>(static_cast<unsigned>(args.rows), kDrawThreads, 0, stream,
                                          args, chunks);
  });
}

}  // namespace kforge::cuda_kernels
