#include "model/torch_runtime.h"

#include <torch/torch.h>
#include <torch/version.h>

#if KFORGE_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace kforge {

TorchRuntimeInfo DescribeTorchRuntime() {
  TorchRuntimeInfo info;
  info.version = TORCH_VERSION;
  info.cuda_available = torch::cuda::is_available();
#if KFORGE_WITH_CUDA
  if (info.cuda_available) {
    const int count = static_cast<int>(torch::cuda::device_count());
    for (int i = 0; i < count; ++i) {
      info.devices.push_back(at::cuda::getDeviceProperties(i)->name);
    }
  }
#endif
  return info;
}

}  // namespace kforge
