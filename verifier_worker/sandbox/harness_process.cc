#include "verifier_worker/sandbox/harness_process.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kforge {

const std::vector<std::string>& HarnessEnvironment() {
  static const auto* names = new std::vector<std::string>{
      "PATH", "LD_LIBRARY_PATH", "HOME", "TMPDIR", "LANG", "LANGUAGE", "LC_*", "TZ", "USER",
      "LOGNAME",
      // Triton builds its launchers with the host's C compiler.
      "CC", "CXX",
      "CUDA_*", "NVIDIA_*", "NVCC_*", "TRITON_*", "TORCH_*", "TORCHINDUCTOR_*", "PYTORCH_*",
      "OMP_*", "KMP_*", "MKL_*", "OPENBLAS_*", "HIP_*", "ROCM_*"};
  return *names;
}

absl::StatusOr<HarnessProcess> StartHarnessProcess(const HarnessSetup& setup,
                                                   const std::string& module) {
  KF_ASSIGN_OR_RETURN(auto pair, FrameChannel::Pair());
  std::vector<std::string> pass_env = HarnessEnvironment();
  pass_env.insert(pass_env.end(), setup.pass_env.begin(), setup.pass_env.end());
  std::map<std::string, std::string> env = {
      {"PYTHONPATH", setup.harness_dir},
      {"PYTHONUNBUFFERED", "1"},
      {"PYTHONDONTWRITEBYTECODE", "1"},
      // The harness, not the user's site configuration, decides what loads.
      {"PYTHONNOUSERSITE", "1"},
  };
  if (setup.device.rfind("cuda", 0) != 0) env["CUDA_VISIBLE_DEVICES"] = "";
  std::error_code ec;
  std::filesystem::create_directories(setup.log_dir, ec);
  const std::string short_name = module.substr(module.rfind('.') + 1);
  KF_ASSIGN_OR_RETURN(
      std::unique_ptr<ChildProcess> process,
      ChildProcess::Spawn({.argv = {setup.python, "-m", module, "3"},
                           .env = env,
                           .pass_env = std::move(pass_env),
                           .log_file = (std::filesystem::path(setup.log_dir) /
                                        absl::StrCat(short_name, ".log"))
                                           .string(),
                           .inherit_fds = {pair.second.fd()}}));
  // The child holds its end now; ours of it closes when `pair` goes.
  return HarnessProcess{std::move(process), std::move(pair.first)};
}

}  // namespace kforge
