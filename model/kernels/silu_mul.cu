// SwiGLU's silu(gate) * up as one kernel instead of two. The silu is rounded
// to the element type before the product, as LibTorch's at::silu followed by
// a multiply rounds, so the result equals those two ops' up to expf.
#include "model/kernels/element_type.cuh"
#include "model/kernels/kernel_launchers.h"

namespace kforge::cuda_kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

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
    const float g = ToFloat(gate[row * a.gate_row + column]);
    const float silu = RoundTo<T>(g / (1.0f + expf(-g)));
    out[index] = FromFloat<T>(silu * ToFloat(up[row * a.up_row + column]));
  }
}

}  // namespace

cudaError_t LaunchSiluMul(const SiluMulArgs& args, cudaStream_t stream) {
  const int64_t total = args.rows * args.width;
  if (total == 0) return cudaSuccess;
  int64_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return DispatchElementType(args.type, [&]<typename T>() {
    SiluMulKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args);
    return cudaGetLastError();
  });
}

}  // namespace kforge::cuda_kernels
