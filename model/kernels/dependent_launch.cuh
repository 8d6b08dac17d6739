// Programmatic dependent launch (Hopper and later): a kernel launched with
// LaunchDependent may be scheduled while the kernel before it on the stream
// is still finishing, and waits inside, at WaitForPreviousKernel, for that
// kernel's completion and its writes. Edges captured into a CUDA graph keep
// the attribute. kforge uses it where it measured faster, side by side in one
// call (bench/RESULTS.md): RMSNorm (it loads its weight before the wait) and
// the sampler's two kernels. The decode attention and SwiGLU kernels were
// slower with it and launch as usual.
//
// The rule for a kernel launched this way: it calls WaitForPreviousKernel()
// before it writes global memory or reads what the previous kernel may
// write. Earlier kernels are complete by then too: the previous kernel itself
// ran only after them, or waited for them in the same way.
#ifndef KFORGE_MODEL_KERNELS_DEPENDENT_LAUNCH_CUH_
#define KFORGE_MODEL_KERNELS_DEPENDENT_LAUNCH_CUH_

#include <utility>

#include <cuda_runtime.h>

namespace kforge::cuda_kernels {

__device__ __forceinline__ void WaitForPreviousKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kKernel<<<grid, block, shared, stream>>>(args...), allowed to overlap the
// previous kernel's tail where the code that runs on the current device was
// compiled for compute_90 or later, the code that waits. Code compiled for an
// older virtual architecture (even JIT-compiled on a Hopper: its ptxVersion
// stays below 90) gets an ordinary launch.
template <auto kKernel, typename... Args>
cudaError_t LaunchDependent(dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                            Args&&... args) {
  // Asked on every launch (a host-side query, cheap next to the launch, and
  // no process-wide state).
  cudaFuncAttributes attributes{};
  const bool known = cudaFuncGetAttributes(&attributes, kKernel) == cudaSuccess;
  if (!known) (void)cudaGetLastError();
  const bool waits = known && attributes.ptxVersion >= 90 && attributes.binaryVersion >= 90;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = waits ? 1 : 0;
  return cudaLaunchKernelEx(&config, kKernel, std::forward<Args>(args)...);
}

}  // namespace kforge::cuda_kernels

#endif  // KFORGE_MODEL_KERNELS_DEPENDENT_LAUNCH_CUH_
