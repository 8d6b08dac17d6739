// What LibTorch this process runs on: version, CUDA availability and GPUs.
// Logged at start-up and exported as kforge_torch_info so an operator can
// see at a glance which build a pod is running.
//
// The only LibTorch include of the services' start-up path lives in the .cc,
// so translation units that include this header stay light.
#ifndef KFORGE_MODEL_TORCH_RUNTIME_H_
#define KFORGE_MODEL_TORCH_RUNTIME_H_

#include <string>
#include <vector>

namespace kforge {

struct TorchRuntimeInfo {
  std::string version;  // "1.13.0", "2.11.0"
  bool cuda_available = false;
  std::vector<std::string> devices;  // GPU names; empty on CPU
};

TorchRuntimeInfo DescribeTorchRuntime();

}  // namespace kforge

#endif  // KFORGE_MODEL_TORCH_RUNTIME_H_
