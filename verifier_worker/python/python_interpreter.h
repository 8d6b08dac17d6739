// Finds the Python interpreter the verifier runs candidates with, and
// checks at start-up that it imports torch (and reports Triton and CUDA), so
// a wrong interpreter is a clear error at start rather than every candidate
// failing later.
//
// On Debian, python3-torch serves /usr/bin/python3 while the first
// `python3` on PATH may be another interpreter without torch; so the
// configured interpreter wins, then /usr/bin/python3, then PATH.
//
//   KF_ASSIGN_OR_RETURN(PythonInfo python, FindPythonWithTorch(config.python(), absl::Seconds(60)));
#ifndef KFORGE_VERIFIER_WORKER_PYTHON_PYTHON_INTERPRETER_H_
#define KFORGE_VERIFIER_WORKER_PYTHON_PYTHON_INTERPRETER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kforge {

struct PythonInfo {
  std::string path;
  std::string python_version;
  std::string torch_version;
  std::string triton_version;  // empty when Triton is absent
  bool cuda_available = false;
};

// Probes one interpreter. FAILED_PRECONDITION naming the path and the
// Python error when it cannot import torch.
absl::StatusOr<PythonInfo> ProbePython(const std::string& path, absl::Duration timeout);

// `configured` non-empty: only that interpreter. Otherwise the candidates
// above in order; the error lists what each one said.
absl::StatusOr<PythonInfo> FindPythonWithTorch(const std::string& configured,
                                               absl::Duration timeout);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_PYTHON_PYTHON_INTERPRETER_H_
