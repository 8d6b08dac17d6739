// SwiGLU's silu(gate) * up as one kernel instead of two. The silu is rounded
// to the element type before the product, as LibTorch's at::silu followed by
// a multiply rounds, so the result equals those two ops' up to expf.
#include <algorithm>
#include <cstdint>

#include "model/kernels/element_type.cuh"
#include "model/kernels/kernel_launchers.h"

namespace kforge::cuda_kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

template <typename T>
__device__ inline T SiluTimes(T gate, T up) {
  const float g = ToFloat(gate);
  const float silu = RoundTo<T>(g / (1.0f + expf(-g)));
  return FromFloat<T>(silu * ToFloat(up));
}

template <typename T>
__global__ void SiluMulKernel(SiluMulArgs a) {
  const T* gate = static_cast<const T*>(a.gate);
  const T* up = static_cast<const T*>(a.up);
  T* out = static_cast<T*>(a.out);
  const int64_t total = a.rows * a.width;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       index < total; index += step) {
    const int64_t row = index / a.width;
    const int64_t column = index - row * a.width;
    out[index] = SiluTimes(gate[row * a.gate_row + column], up[row * a.up_row + column]);
  }
}

// The same over 16-byte pieces (kVec elements; one division per piece, one
// load per operand): where the width, the row strides and the pointers are
// multiples of a piece. A decode step's [64, 8960] is memory-bound, and the
// scalar kernel spent its time on per-element index arithmetic.
template <typename T>
__global__ void SiluMulVectorKernel(SiluMulArgs a) {
  constexpr int kVec = 16 / sizeof(T);
  struct alignas(16) Piece {
    T v[kVec];
  };
  const T* gate = static_cast<const T*>(a.gate);
  const T* up = static_cast<const T*>(a.up);
  T* out = static_cast<T*>(a.out);
  const int64_t pieces_per_row = a.width / kVec;
  const int64_t total = a.rows * pieces_per_row;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t piece = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       piece < total; piece += step) {
    const int64_t row = piece / pieces_per_row;
    const int64_t column = (piece - row * pieces_per_row) * kVec;
    const Piece g = *reinterpret_cast<const Piece*>(gate + row * a.gate_row + column);
    const Piece u = *reinterpret_cast<const Piece*>(up + row * a.up_row + column);
    Piece o;
#pragma unroll
    for (int i = 0; i < kVec; ++i) o.v[i] = SiluTimes(g.v[i], u.v[i]);
    *reinterpret_cast<Piece*>(out + row * a.width + column) = o;
  }
}

template <typename T>
bool Vectorizable(const SiluMulArgs& a) {
  constexpr int64_t kVec = 16 / sizeof(T);
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.width % kVec == 0 && a.gate_row % kVec == 0 && a.up_row % kVec == 0 &&
         aligned(a.gate) && aligned(a.up) && aligned(a.out);
}

}  // namespace

cudaError_t LaunchSiluMul(const SiluMulArgs& args, cudaStream_t stream) {
  const int64_t total = args.rows * args.width;
  if (total == 0) return cudaSuccess;
  return DispatchElementType(args.type, [&]<typename T>() {
    const bool vector = Vectorizable<T>(args);
    const int64_t items = vector ? total / static_cast<int64_t>(16 / sizeof(T)) : total;
    const auto blocks =
        static_cast<unsigned>(std::min((items + kThreads - 1) / kThreads, kMaxBlocks));
    if (vector) {
      SiluMulVectorKernel<T><<<blocks, kThreads, 0, stream>>>(args);
    } else {
      SiluMulKernel<T><<<blocks, kThreads, 0, stream>>>(args);
    }
    return cudaGetLastError();
  });
}

}  // namespace kforge::cuda_kernels
