// Conversions between the model's element types and float inside kforge's
// kernels, and the dispatch from ElementType to a kernel template.
#ifndef KFORGE_MODEL_KERNELS_ELEMENT_TYPE_CUH_
#define KFORGE_MODEL_KERNELS_ELEMENT_TYPE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "model/kernels/kernel_launchers.h"

namespace kforge::cuda_kernels {

__device__ inline float ToFloat(float x) { return x; }
__device__ inline float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float ToFloat(__half x) { return __half2float(x); }

template <typename T>
__device__ inline T FromFloat(float x);
template <>
__device__ inline float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}

// x as a LibTorch op that stores a T hands it on: rounded to T, in float.
template <typename T>
__device__ inline float RoundTo(float x) {
  return ToFloat(FromFloat<T>(x));
}

// Calls launch.template operator()<T>() for the C++ type of `type`.
template <typename Launch>
cudaError_t DispatchElementType(ElementType type, Launch&& launch) {
  switch (type) {
    case ElementType::kFloat32:
      return launch.template operator()<float>();
    case ElementType::kBFloat16:
      return launch.template operator()<__nv_bfloat16>();
    case ElementType::kFloat16:
      return launch.template operator()<__half>();
  }
  return cudaErrorInvalidValue;
}

}  // namespace kforge::cuda_kernels

#endif  // KFORGE_MODEL_KERNELS_ELEMENT_TYPE_CUH_
