// Temperature sampling of one token per row in one kernel, for rows that
// keep the whole vocabulary (no top-k or top-p). A block per row:
//   1. m = max(z / T) and s = sum exp(z / T - m), in float32;
//      log p_v = (z_v / T - m) - log s, in float32, as at::log_softmax;
//   2. the probabilities exp(log p_v), summed in double in tiles of kTile
//      tokens: each warp's share of each tile, then the shares in warp order
//      (all in shared memory; no block-wide barrier per tile);
//   3. target = u * total; the tile whose running sum first exceeds it, and
//      in that tile a block-wide scan finds the first token whose running sum
//      exceeds the target: the inverse CDF at u.
// The LibTorch path (token_sampler.cc) draws from the same distribution with
// a double cumsum over the whole [B, V] row and eager kernels: ~0.5 ms a step
// at batch 64 on an H100, against 0.14 ms here (nsys, bench/RESULTS.md; the
// passes are latency-bound, one block per row). The two can differ where
// u * total falls within rounding of a CDF step (float32 probabilities
// summed in another order), and then by a neighbouring token.
#include <cfloat>
#include <climits>

#include "model/kernels/kernel_launchers.h"

namespace kforge::cuda_kernels {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kItems = 4;  // consecutive tokens per thread within a tile
constexpr int64_t kTile = int64_t{kThreads} * kItems;
constexpr unsigned kAllLanes = 0xffffffffu;

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  template <typename V>
  __device__ V operator()(V a, V b) const { return a + b; }
};

// Every thread gets op over the block's values. scratch holds kWarps values.
template <typename V, typename Op>
__device__ V BlockReduce(V value, V* scratch, Op op) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) {
    value = op(value, __shfl_down_sync(kAllLanes, value, offset));
  }
  __syncthreads();  // scratch may still be read from the previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = scratch[lane];  // kWarps == 32
    for (int offset = 16; offset > 0; offset /= 2) {
      value = op(value, __shfl_down_sync(kAllLanes, value, offset));
    }
    if (lane == 0) scratch[0] = value;
  }
  __syncthreads();
  return scratch[0];
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

// The sum of the values of the threads before this one.
__device__ double BlockExclusiveSum(double value, double* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const WarpPrefix in_warp = WarpPrefixSum(value);
  __syncthreads();
  if (lane == 31) scratch[warp] = in_warp.inclusive;
  __syncthreads();
  if (warp == 0) scratch[lane] = WarpPrefixSum(scratch[lane]).exclusive;  // kWarps == 32
  __syncthreads();
  return scratch[warp] + in_warp.exclusive;
}

__global__ void __launch_bounds__(kThreads) TemperedSampleKernel(TemperedSampleArgs a) {
  // tiles tile sums, then tiles * kWarps warp shares of them.
  extern __shared__ double tile_sums[];
  __shared__ double scratch[kWarps];
  __shared__ float float_scratch[kWarps];
  __shared__ int64_t chosen_tile;
  __shared__ double base, target;
  __shared__ unsigned long long first_above, last_positive;

  const int64_t row = blockIdx.x;
  const int64_t vocab = a.vocab;
  const float* z = a.logits + row * a.logits_row;
  // As the LibTorch path: the temperature column cast to float, then z / T.
  const float temperature = static_cast<float>(a.temperature[row * a.temperature_stride]);
  const double u = a.uniform[row * a.uniform_stride];
  const int tid = threadIdx.x;

  float max_value = -FLT_MAX;
#pragma unroll 4
  for (int64_t v = tid; v < vocab; v += kThreads) max_value = fmaxf(max_value, z[v] / temperature);
  max_value = BlockReduce(max_value, float_scratch, Max());
  float exp_sum = 0.0f;
#pragma unroll 4
  for (int64_t v = tid; v < vocab; v += kThreads) exp_sum += expf(z[v] / temperature - max_value);
  exp_sum = BlockReduce(exp_sum, float_scratch, Sum());
  const float log_sum = logf(exp_sum);
  auto log_prob = [&](int64_t v) { return (z[v] / temperature - max_value) - log_sum; };
  auto prob = [&](int64_t v) { return v < vocab ? static_cast<double>(expf(log_prob(v))) : 0.0; };

  // Tile sums without a block-wide barrier per tile: each warp's share of
  // every tile first (warp_sums, [tiles][kWarps]), then one thread per tile
  // adds its kWarps shares in warp order.
  const int64_t tiles = (vocab + kTile - 1) / kTile;
  double* warp_sums = tile_sums + tiles;
  const int lane = tid % 32, warp = tid / 32;
  for (int64_t tile = 0; tile < tiles; ++tile) {
    double local = 0;
    const int64_t first = tile * kTile + int64_t{tid} * kItems;
    for (int j = 0; j < kItems; ++j) local += prob(first + j);
    for (int offset = 16; offset > 0; offset /= 2) {
      local += __shfl_down_sync(kAllLanes, local, offset);
    }
    if (lane == 0) warp_sums[tile * kWarps + warp] = local;
  }
  __syncthreads();
  for (int64_t tile = tid; tile < tiles; tile += kThreads) {
    double sum = 0;
    for (int w = 0; w < kWarps; ++w) sum += warp_sums[tile * kWarps + w];
    tile_sums[tile] = sum;
  }
  __syncthreads();
  if (tid == 0) {
    double total = 0;
    for (int64_t tile = 0; tile < tiles; ++tile) total += tile_sums[tile];
    target = u * total;
    // The last tile with mass guards against a target at or past the end
    // (rounding only: u < 1).
    double running = 0, running_at_last = 0;
    int64_t chosen = -1, last_with_mass = 0;
    for (int64_t tile = 0; tile < tiles && chosen < 0; ++tile) {
      if (tile_sums[tile] > 0) {
        last_with_mass = tile;
        running_at_last = running;
      }
      if (running + tile_sums[tile] > target) chosen = tile;
      else running += tile_sums[tile];
    }
    chosen_tile = chosen >= 0 ? chosen : last_with_mass;
    base = chosen >= 0 ? running : running_at_last;
    first_above = ULLONG_MAX;
    last_positive = 0;
  }
  __syncthreads();

  const int64_t first = chosen_tile * kTile + int64_t{tid} * kItems;
  double p[kItems];
  double local = 0;
  for (int j = 0; j < kItems; ++j) {
    p[j] = prob(first + j);
    local += p[j];
  }
  double running = base + BlockExclusiveSum(local, scratch);
  for (int j = 0; j < kItems; ++j) {
    if (p[j] <= 0) continue;
    running += p[j];
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
    a.logprobs[row] = log_prob(token);
  }
}

}  // namespace

cudaError_t LaunchTemperedSample(const TemperedSampleArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  const int64_t tiles = (args.vocab + kTile - 1) / kTile;
  const size_t shared = static_cast<size_t>(tiles) * (1 + kWarps) * sizeof(double);
  if (shared > 48 * 1024) return cudaErrorInvalidValue;  // a vocabulary over ~1.5M tokens
  TemperedSampleKernel<<<static_cast<unsigned>(args.rows), kThreads, shared, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace kforge::cuda_kernels
