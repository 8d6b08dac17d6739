#include "tests/support/fixtures.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include "common/paths/kernelbench_dir.h"

namespace kforge::testing {

namespace fs = std::filesystem;

std::string BinaryPath(const std::string& name) {
  return (fs::path(KFORGE_TEST_BIN_DIR) / name).string();
}

std::string SharedKernelBenchDir() {
  absl::StatusOr<KernelBenchDir> found = FindKernelBenchDir(KFORGE_TEST_SOURCE_DIR);
  if (found.ok()) return found->path;
  // Once per test binary, not once per skipped test: the how-to, then each
  // skip names only what it missed.
  static std::once_flag said;
  std::call_once(said, [&] {
    std::fprintf(stderr, "[kforge tests] tests that read KernelBench's problems skip: %s\n",
                 std::string(found.status().message()).c_str());
  });
  return "";
}

void WriteFile(const std::string& path, const std::string& contents) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << contents;
  if (!out) throw std::runtime_error("cannot write " + path);
}

void WriteCheckpointSkeleton(const std::string& dir, const std::string& architecture) {
  WriteFile(dir + "/config.json",
            R"({"architectures": [")" + architecture + R"("], "hidden_size": 64})");
  WriteFile(dir + "/tokenizer.json", R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})");
  // safetensors: 8-byte little-endian header length, then the JSON header.
  const std::string header = "{}";
  std::string file(8, '\0');
  file[0] = static_cast<char>(header.size());
  WriteFile(dir + "/model.safetensors", file + header);
}

void WriteTaskFolder(const std::string& dir) {
  const std::string relu = R"py(import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 16
dim = 1024

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
)py";
  WriteFile(dir + "/level1/1_Relu.py", relu);
  WriteFile(dir + "/level1/2_Scale.py", R"py(import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale

n = 4096

def get_inputs():
    return [torch.randn(n)]

def get_init_inputs():
    return [2.0]
)py");
  WriteFile(dir + "/solutions/level1/2_Scale.py", R"py(import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale
)py");
  WriteFile(dir + "/level2/1_ReluScale.py", relu);
}

kforge::v1::JobSpec ValidJobSpec(const std::string& model_dir, const std::string& tasks_dir) {
  kforge::v1::JobSpec spec;
  spec.set_name("test job");
  spec.set_model_path(model_dir);
  spec.mutable_tasks()->set_kernelbench_dir(tasks_dir);
  spec.set_total_steps(10);
  return spec;
}

}  // namespace kforge::testing
