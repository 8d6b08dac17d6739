// Decode attention over the KV cache: one query token per row, its query
// heads grouped by kv head, on tensor cores.
//
// WHY. At decode batch sizes the attention reads every cached key and value
// once per step and computes little on them, so it should run at the memory
// bandwidth. LibTorch's fused attention (cuDNN) reads 64 rows of ~1,000 keys
// at ~1.65 TB/s on an H100 and issues a memset before every call; FlashAttention's
// varlen kernel does no better (bench/decode_attention_probe.py). Keys and
// values are read here once per kv head, by many blocks at once, through
// asynchronous copies, and the group's query heads share each read.
//
// HOW. A block of kWarps warps takes (split, kv head, row). The row's keys
// 0..positions[row] are cut into slabs of kSlab keys and the slabs into
// `splits` even ranges, one per block; warp w of a block takes slabs w,
// w + kWarps, ... of its range, each copied into shared memory (kStages deep)
// while the previous is used. A slab is one m16n8k16 MMA deep: the scores
// S = Q K^T come from rows = the group's query heads (zero-padded to 16)
// against 16 keys, then P = exp2(S - m) (online softmax in float32, as
// FlashAttention) feeds O += P V straight from the score registers. The
// block's warps then merge their (max, sum, O) in shared memory; with one
// split that is the output, otherwise each block writes its normalised O
// and log-sum-exp and CombineSplitsKernel merges the splits.
//
// Numerics are FlashAttention's: scores and softmax in float32, P rounded to
// the element type for the P V product, accumulation in float32.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "model/kernels/element_type.cuh"
#include "model/kernels/kernel_launchers.h"

namespace kforge::cuda_kernels {
namespace {

// 4 warps of 2 slab buffers each: on an H100, 8 warps or 3-4 buffers were
// no faster (within 3%, bench/RESULTS.md); more would only cost occupancy.
constexpr int kWarps = 4;
constexpr int kSlab = 16;    // keys per warp step: one MMA's k
constexpr int kStages = 2;   // slab buffers per warp
constexpr int kMmaRows = 16;   // query heads per kv head at most
constexpr float kLog2e = 1.4426950408889634f;

// A shared-memory row of a slab: head_dim plus 8 elements, so that rows are
// 16 bytes apart modulo 128 and the 8 rows an ldmatrix phase or a fragment
// load touches fall in distinct banks.
template <int D>
constexpr int kRowElems = D + 8;

template <int D>
constexpr int SharedBytes() {
  constexpr int slabs = kWarps * kStages * 2 * kSlab * kRowElems<D> * 2;  // 2-byte elements
  constexpr int merge = (kWarps * kMmaRows * D + 2 * kWarps * kMmaRows) * 4;
  return slabs > merge ? slabs : merge;
}

__device__ inline uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared without blocking; zeros when !valid (the source
// is then not read).
__device__ inline void CopyAsync16(void* shared, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(SharedAddress(shared)),
               "l"(global), "r"(valid ? 16 : 0));
}
__device__ inline void CommitCopies() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ inline void WaitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Four 8x8 matrices of 2-byte elements, transposed: thread (g, t) gets
// elements [2t][g] and [2t + 1][g] of each (rows are the addresses given by
// lanes 8i..8i+7 for matrix i).
__device__ inline void LoadMatricesTransposed(uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(row_address)));
}

// d += a b for a 16x16 (row-major fragments), b 16x8 (column-major), float
// accumulators.
template <typename T>
__device__ inline void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ inline void Mma<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ inline void Mma<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                   uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as a pair of T in one register, `low` in the low half.
template <typename T>
__device__ inline uint32_t PackPair(float low, float high);
template <>
__device__ inline uint32_t PackPair<__nv_bfloat16>(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&pair);
}
template <>
__device__ inline uint32_t PackPair<__half>(float low, float high) {
  const __half2 pair = __floats2half2_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

__device__ inline uint32_t LoadPair(const void* p) { return *static_cast<const uint32_t*>(p); }

// The pair of T in one register as floats (.x the low half), by bit
// operations: taking the register's address would put it in local memory.
template <typename T>
__device__ inline float2 UnpackPair(uint32_t pair);
template <>
__device__ inline float2 UnpackPair<__nv_bfloat16>(uint32_t pair) {
  return make_float2(__uint_as_float(pair << 16), __uint_as_float(pair & 0xffff0000u));
}
template <>
__device__ inline float2 UnpackPair<__half>(uint32_t pair) {
  return make_float2(__half2float(__ushort_as_half(static_cast<unsigned short>(pair & 0xffffu))),
                     __half2float(__ushort_as_half(static_cast<unsigned short>(pair >> 16))));
}

// The largest of the values the four threads of an MMA row group hold.
__device__ inline float QuadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float QuadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// kRotate (a.inv_freq set): q and the new key arrive before RoPE; a
// template parameter, so the plain kernel carries none of its code.
template <typename T, int D, bool kRotate>
__global__ void __launch_bounds__(kWarps * 32)
    DecodeAttentionKernel(DecodeAttentionArgs a) {
  extern __shared__ __align__(16) unsigned char shared[];
  const int split = blockIdx.x, kv_head = blockIdx.y, row = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // the MMA fragment coordinates
  const int group = a.heads / a.kv_heads;
  const int64_t slot = a.slots[row];
  const int length = static_cast<int>(a.positions[row]) + 1;
  const int slabs = (length + kSlab - 1) / kSlab;
  const int per_split = (slabs + a.splits - 1) / a.splits;
  const int first_slab = split * per_split;
  const int end_slab = min(slabs, first_slab + per_split);

  const int64_t cache_offset = slot * a.cache_slot + kv_head * a.cache_head;
  const T* keys = static_cast<const T*>(a.keys) + cache_offset;
  const T* values = static_cast<const T*>(a.values) + cache_offset;

  T* slab_memory = reinterpret_cast<T*>(shared) + warp * kStages * 2 * kSlab * kRowElems<D>;
  const auto key_buffer = [&](int stage) { return slab_memory + stage * 2 * kSlab * kRowElems<D>; };
  const auto value_buffer = [&](int stage) { return key_buffer(stage) + kSlab * kRowElems<D>; };
  // Copies slab `s`'s keys and values into `stage`; keys past the row's
  // length arrive as zeros (never read from the cache, which may end there).
  const auto load_slab = [&](int s, int stage) {
    constexpr int kChunksPerRow = D / 8;  // 16-byte chunks
    T* key_dst = key_buffer(stage);
    T* value_dst = value_buffer(stage);
#pragma unroll
    for (int c = lane; c < kSlab * kChunksPerRow; c += 32) {
      const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
      const int key = s * kSlab + r;
      const bool valid = key < length;
      const int64_t src = static_cast<int64_t>(valid ? key : 0) * a.cache_pos + col;
      CopyAsync16(key_dst + r * kRowElems<D> + col, keys + src, valid);
      CopyAsync16(value_dst + r * kRowElems<D> + col, values + src, valid);
    }
  };

  // Slabs s, s + kWarps, ... in flight kStages - 1 ahead; a group is
  // committed for every slot, empty past the end, so that waiting for all
  // but the newest kStages - 1 groups always means slab s has arrived. The
  // first are under way before q is read (and rotated).
#pragma unroll
  for (int ahead = 0; ahead < kStages - 1; ++ahead) {
    const int s = first_slab + warp + ahead * kWarps;
    if (s < end_slab) load_slab(s, ahead);
    CommitCopies();
  }

  // With a.inv_freq, q and the row's new key come unrotated: the rotary
  // embedding's cos and sin at the row's position, rounded to T as
  // FusedRopeStore rounds them (rope_store.cu; the same arithmetic follows).
  constexpr int kHalf = D / 2;
  __shared__ float rope_cos[kHalf], rope_sin[kHalf];
  if constexpr (kRotate) {
    for (int i = threadIdx.x; i < kHalf; i += blockDim.x) {
      float sin_value, cos_value;
      sincosf(static_cast<float>(length - 1) * a.inv_freq[i], &sin_value, &cos_value);
      rope_cos[i] = RoundTo<T>(cos_value);
      rope_sin[i] = RoundTo<T>(sin_value);
    }
    __syncthreads();
  }
  // Elements col, col + 1 of head vector x (rotated with kRotate), as a pair.
  const auto head_pair = [&](const T* x, int col) -> uint32_t {
    if constexpr (!kRotate) {
      return LoadPair(x + col);
    } else {
      const bool low = col < kHalf;
      const int i = low ? col : col - kHalf;
      const float2 x1 = UnpackPair<T>(LoadPair(x + i)), x2 = UnpackPair<T>(LoadPair(x + i + kHalf));
      const auto rotated = [&](float a1, float a2, int j) {
        const float c = rope_cos[i + j], s = rope_sin[i + j];
        return low ? a1 * c - a2 * s : a2 * c + a1 * s;
      };
      return PackPair<T>(rotated(x1.x, x2.x, 0), rotated(x1.y, x2.y, 1));
    }
  };

  // Q as the MMA's A operand, rows g and g + 8 of the group, zero past it.
  uint32_t q[D / 16][4];
  {
    const T* q_row = static_cast<const T*>(a.q) + row * a.q_row;
    const int head0 = kv_head * group;
    const T* q_g = q_row + (head0 + g) * a.q_head;
    const T* q_g8 = q_row + (head0 + g + 8) * a.q_head;
    const bool has_g = g < group, has_g8 = g + 8 < group;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int col = kk * 16 + 2 * t;
      q[kk][0] = has_g ? head_pair(q_g, col) : 0u;
      q[kk][1] = has_g8 ? head_pair(q_g8, col) : 0u;
      q[kk][2] = has_g ? head_pair(q_g, col + 8) : 0u;
      q[kk][3] = has_g8 ? head_pair(q_g8, col + 8) : 0u;
    }
  }

  // With kRotate, the new token's key and value (element lane + 32 j in
  // [j]), read now with q: the warp that reaches their slab rotates and
  // stores them without waiting there for a load.
  constexpr int kPerLane = kRotate ? D / 32 : 1;
  T k_new[kPerLane], v_new[kPerLane];
  if constexpr (kRotate) {
    const T* k_in = static_cast<const T*>(a.k) + row * a.k_row + kv_head * a.k_head;
    const T* v_in = static_cast<const T*>(a.v) + row * a.v_row + kv_head * a.v_head;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      k_new[j] = k_in[lane + 32 * j];
      v_new[j] = v_in[lane + 32 * j];
    }
  }

  const float scale = a.scale * kLog2e;  // scores in log2 units: exp2 below
  float m[2] = {-INFINITY, -INFINITY};   // running max of rows g, g + 8
  float l[2] = {0.f, 0.f};               // this thread's share of the running sums
  float o[D / 8][4] = {};                // O, as MMA accumulators over head_dim

  int stage = 0;
  for (int s = first_slab + warp; s < end_slab; s += kWarps) {
    const int refill = s + (kStages - 1) * kWarps;
    if (refill < end_slab) load_slab(refill, (stage + kStages - 1) % kStages);
    CommitCopies();
    WaitCopies<kStages - 1>();
    __syncwarp();
    if (kRotate && s == (length - 1) / kSlab) {
      // The slab of the row's new token: its key and value come from the
      // inputs (the copy brought what the cache held before). This warp
      // alone covers that position, so it also stores them in the cache.
      const int position = length - 1;
      T* k_smem = key_buffer(stage) + (position % kSlab) * kRowElems<D>;
      T* v_smem = value_buffer(stage) + (position % kSlab) * kRowElems<D>;
      T* k_cache = static_cast<T*>(a.keys) + cache_offset + position * a.cache_pos;
      T* v_cache = static_cast<T*>(a.values) + cache_offset + position * a.cache_pos;
#pragma unroll
      for (int j = 0; j < kPerLane / 2; ++j) {  // element i of the low half, i + D / 2
        const int i = lane + 32 * j;
        const float x1 = ToFloat(k_new[j]), x2 = ToFloat(k_new[j + kPerLane / 2]);
        const float c = rope_cos[i], sn = rope_sin[i];
        const T low = FromFloat<T>(x1 * c - x2 * sn), high = FromFloat<T>(x2 * c + x1 * sn);
        k_smem[i] = k_cache[i] = low;
        k_smem[i + kHalf] = k_cache[i + kHalf] = high;
      }
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        v_smem[lane + 32 * j] = v_cache[lane + 32 * j] = v_new[j];
      }
      __syncwarp();
    }
    const T* k_slab = key_buffer(stage);
    const T* v_slab = value_buffer(stage);

    // S = Q K^T over the slab's 16 keys: two 8-key blocks.
    float scores[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) {
        const T* k_row = k_slab + (nb * 8 + g) * kRowElems<D> + kk * 16 + 2 * t;
        Mma<T>(scores[nb], q[kk], LoadPair(k_row), LoadPair(k_row + 8));
      }
    }
    // scores[nb][i]: row g (i < 2) or g + 8, key nb * 8 + 2t + (i & 1).
    float slab_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = s * kSlab + nb * 8 + 2 * t + (i & 1);
        scores[nb][i] = key < length ? scores[nb][i] * scale : -INFINITY;
        slab_max[i / 2] = fmaxf(slab_max[i / 2], scores[nb][i]);
      }
    }
    float rescale[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // Finite: a slab holds at least one of the row's keys.
      const float m_new = fmaxf(m[r], QuadMax(slab_max[r]));
      rescale[r] = exp2f(m[r] - m_new);
      m[r] = m_new;
      l[r] *= rescale[r];
    }
#pragma unroll
    for (int nb = 0; nb < 2; ++nb) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        scores[nb][i] = exp2f(scores[nb][i] - m[i / 2]);
        l[i / 2] += scores[nb][i];
      }
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= rescale[0];
      o[n][1] *= rescale[0];
      o[n][2] *= rescale[1];
      o[n][3] *= rescale[1];
    }
    // The score accumulators of two 8-key blocks are the A operand of P V.
    const uint32_t p[4] = {PackPair<T>(scores[0][0], scores[0][1]),
                           PackPair<T>(scores[0][2], scores[0][3]),
                           PackPair<T>(scores[1][0], scores[1][1]),
                           PackPair<T>(scores[1][2], scores[1][3])};
    // O += P V, 16 head_dim columns (two 8-column blocks) per ldmatrix:
    // matrices (keys 0-7, cols c..c+7), (keys 8-15, c..), (0-7, c+8..),
    // (8-15, c+8..).
    const int matrix = lane / 8;
    const T* v_row = v_slab + ((matrix & 1) * 8 + lane % 8) * kRowElems<D> + (matrix >> 1) * 8;
#pragma unroll
    for (int db = 0; db < D / 16; ++db) {
      uint32_t b[4];
      LoadMatricesTransposed(b, v_row + db * 16);
      Mma<T>(o[2 * db], p, b[0], b[1]);
      Mma<T>(o[2 * db + 1], p, b[2], b[3]);
    }
    __syncwarp();  // the slab's buffer is refilled next iteration
    stage = (stage + 1) % kStages;
  }
  WaitCopies<0>();  // only empty groups can remain; none may outlive the block
  l[0] = QuadSum(l[0]);
  l[1] = QuadSum(l[1]);

  // Merge the warps: each writes its (max, sum, O) rows to shared memory.
  __syncthreads();  // every warp is done with its slabs (all copies waited for)
  float* merged_o = reinterpret_cast<float*>(shared);     // [warps][16][D]
  float* merged_m = merged_o + kWarps * kMmaRows * D;     // [warps][16]
  float* merged_l = merged_m + kWarps * kMmaRows;         // [warps][16]
  {
    float* o_g = merged_o + (warp * kMmaRows + g) * D + 2 * t;
    float* o_g8 = o_g + 8 * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o_g[n * 8] = o[n][0];
      o_g[n * 8 + 1] = o[n][1];
      o_g8[n * 8] = o[n][2];
      o_g8[n * 8 + 1] = o[n][3];
    }
    if (t == 0) {
      merged_m[warp * kMmaRows + g] = m[0];
      merged_m[warp * kMmaRows + g + 8] = m[1];
      merged_l[warp * kMmaRows + g] = l[0];
      merged_l[warp * kMmaRows + g + 8] = l[1];
    }
  }
  __syncthreads();
  for (int index = threadIdx.x; index < group * D; index += blockDim.x) {
    const int h = index / D, d = index % D;
    float top = -INFINITY;
    for (int w = 0; w < kWarps; ++w) top = fmaxf(top, merged_m[w * kMmaRows + h]);
    float sum = 0.f, value = 0.f;
    if (top != -INFINITY) {  // -inf: no key fell to this block
      for (int w = 0; w < kWarps; ++w) {
        const float weight = exp2f(merged_m[w * kMmaRows + h] - top);
        sum += merged_l[w * kMmaRows + h] * weight;
        value += merged_o[(w * kMmaRows + h) * D + d] * weight;
      }
    }
    const int64_t row_head = static_cast<int64_t>(row) * a.heads + kv_head * group + h;
    if (a.splits == 1) {
      static_cast<T*>(a.out)[row_head * D + d] = FromFloat<T>(value / sum);
    } else {
      const int64_t part = row_head * a.splits + split;
      a.partial_out[part * D + d] = sum > 0.f ? value / sum : 0.f;
      if (d == 0) a.partial_lse[part] = sum > 0.f ? top + log2f(sum) : -INFINITY;
    }
  }
}

// out[row, head] from the splits' normalised O and log-sum-exp (log2 units).
template <typename T>
__global__ void CombineSplitsKernel(DecodeAttentionArgs a) {
  const int64_t row_head = blockIdx.x;
  const float* lse = a.partial_lse + row_head * a.splits;
  float top = -INFINITY;
  for (int s = 0; s < a.splits; ++s) top = fmaxf(top, lse[s]);  // split 0 has keys
  for (int d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
    float sum = 0.f, value = 0.f;
    for (int s = 0; s < a.splits; ++s) {
      const float weight = exp2f(lse[s] - top);
      sum += weight;
      value += weight * a.partial_out[(row_head * a.splits + s) * a.head_dim + d];
    }
    static_cast<T*>(a.out)[row_head * a.head_dim + d] = FromFloat<T>(value / sum);
  }
}

template <typename T, int D, bool kRotate>
cudaError_t LaunchFor(const DecodeAttentionArgs& a, cudaStream_t stream) {
  constexpr int bytes = SharedBytes<D>();
  // Needed only past the 48 KB default (34 KB at D = 128 with 2 buffers a
  // warp; the sweep in bench/RESULTS.md went to 4); set on every launch (a
  // host-side attribute, cheap next to the launch, and no process-wide "done
  // once" state).
  if (cudaError_t e = cudaFuncSetAttribute(DecodeAttentionKernel<T, D, kRotate>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      e != cudaSuccess) {
    return e;
  }
  // An ordinary launch, not a programmatic dependent one (dependent_launch.cuh):
  // side by side in one call, the 1.5B decode step was 0.7% faster without it
  // (bench/RESULTS.md). Likely why: its blocks, about one per multiprocessor,
  // each stream a row's whole cache, so where they land matters, and launched
  // early they are placed while the q/k/v GEMM still holds multiprocessors.
  DecodeAttentionKernel<T, D, kRotate><<<dim3(a.splits, a.kv_heads, a.rows), kWarps * 32, bytes,
                                         stream>>>(a);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || a.splits == 1) return e;
  CombineSplitsKernel<T><<<a.rows * a.heads, D, 0, stream>>>(a);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t LaunchFor(const DecodeAttentionArgs& a, cudaStream_t stream) {
  return a.inv_freq != nullptr ? LaunchFor<T, D, true>(a, stream)
                               : LaunchFor<T, D, false>(a, stream);
}

template <typename T>
cudaError_t LaunchTyped(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    return cudaErrorInvalidValue;  // no float32 MMA path; the caller checks
  } else {
    switch (a.head_dim) {
      case 64:
        return LaunchFor<T, 64>(a, stream);
      case 128:
        return LaunchFor<T, 128>(a, stream);
      default:
        return cudaErrorInvalidValue;
    }
  }
}

}  // namespace

bool DecodeAttentionSupports(ElementType type, int heads, int kv_heads, int head_dim) {
  return type != ElementType::kFloat32 && (head_dim == 64 || head_dim == 128) && kv_heads > 0 &&
         heads % kv_heads == 0 && heads / kv_heads <= kMmaRows;
}

int DecodeAttentionSplits(const DecodeAttentionArgs& shape, int64_t max_keys,
                          int multiprocessors) {
  // About one block per multiprocessor: measured on an H100 (bench/RESULTS.md),
  // more splits cost their merge more than the extra blocks gain, and rows
  // that already give every multiprocessor a block are best unsplit. At
  // least a slab per warp in each block.
  const int64_t blocks = std::max<int64_t>(1, static_cast<int64_t>(shape.rows) * shape.kv_heads);
  const int64_t most = (max_keys + kWarps * kSlab - 1) / (kWarps * kSlab);
  return static_cast<int>(std::max<int64_t>(1, std::min(multiprocessors / blocks, most)));
}

cudaError_t LaunchDecodeAttention(const DecodeAttentionArgs& args, cudaStream_t stream) {
  if (args.rows == 0) return cudaSuccess;
  if (!DecodeAttentionSupports(args.type, args.heads, args.kv_heads, args.head_dim) ||
      args.splits < 1) {
    return cudaErrorInvalidValue;
  }
  return DispatchElementType(args.type, [&]<typename T>() { return LaunchTyped<T>(args, stream); });
}

}  // namespace kforge::cuda_kernels
