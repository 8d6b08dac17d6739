// Whose work a candidate's forward ran: attribution of what the profiler
// recorded during its correctness runs (harness launch_record.py) to the
// candidate's own Triton kernels, to allowed memory work (allocation, fill,
// copy, views, transfers), or to library compute (ATen arithmetic and
// reductions, GEMMs, cuBLAS, cuDNN, another program's Triton kernels).
//
// The record is a run-time fact: `x * (x > 0)` is aten::mul and aten::gt
// whatever the source looks like, and a torch fallback behind a decoy
// Triton launch shows up as the library kernels it ran. The lists of what
// is allowed live here, in the verifier, out of the candidate's reach.
//
//   LaunchAttribution attribution({"relu_kernel"}, task.allowed_library_ops());
//   attribution.Add(*reply.Get("launches"));          // after each recorded run
//   if (!attribution.LibraryCompute().empty()) ...    // a fallback
//   *verdict.mutable_attribution() = attribution.Summary(/*enforced=*/true);
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_LAUNCH_ATTRIBUTION_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_LAUNCH_ATTRIBUTION_H_

#include <map>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>

#include "absl/strings/string_view.h"
#include "kforge/v1/verdict.pb.h"

namespace kforge {

// "kernel" for GPU work (kernels, copies, memsets), "op" for host-side ATen
// operators.
enum class LaunchKind { kKernel, kOp };

// The origin of one recorded name. `own_kernels` are the candidate's
// @triton.jit function names (Triton names each GPU kernel after its
// function); `task_allowed` are ATen op names or GPU kernel name substrings
// the task allows (Task.allowed_library_ops).
kforge::v1::LaunchOrigin ClassifyLaunch(LaunchKind kind, absl::string_view name,
                                        const std::vector<std::string>& own_kernels,
                                        const std::vector<std::string>& task_allowed);

class LaunchAttribution {
 public:
  LaunchAttribution(std::vector<std::string> own_kernels, std::vector<std::string> task_allowed)
      : own_(std::move(own_kernels)), allowed_(std::move(task_allowed)) {}

  // What one recorded run shows on its own.
  struct RunFacts {
    double gpu_us = 0;            // all recorded GPU work
    double host_transfer_us = 0;  // "Memcpy DtoH" and "Memcpy HtoD"
  };

  // One recorded run's "launches": a list of [kind, name, calls, gpu_us].
  // Malformed rows are ignored: a record that says too little proves no own
  // kernel ran. The harness names at most 256 launches a run and counts the
  // rest under a name this classifies as library compute (fail closed).
  RunFacts Add(const google::protobuf::Value& launches);

  // Distinct library-compute names of that kind seen so far. On a GPU the
  // GPU kernels decide (host-side ops on host tensors, such as Triton's
  // autotuner's statistics, launch nothing there; work moved to the host
  // shows as transfers); on the CPU, the ATen ops.
  std::vector<std::string> LibraryCompute(LaunchKind kind) const;
  // Whether any of the candidate's own Triton kernels ran on the GPU.
  bool OwnKernelRan() const;
  // Whether any GPU work at all was recorded (false where the profiler
  // could not see the device: then OwnKernelRan says nothing).
  bool SawGpuWork() const;
  int runs() const { return runs_; }

  kforge::v1::LaunchAttribution Summary(bool enforced) const;

 private:
  struct Entry {
    LaunchKind kind;
    kforge::v1::LaunchOrigin origin;
    int64_t calls = 0;
    double gpu_us = 0;
  };
  std::vector<std::string> own_;
  std::vector<std::string> allowed_;
  std::map<std::pair<int, std::string>, Entry> seen_;  // (kind, name)
  int runs_ = 0;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_LAUNCH_ATTRIBUTION_H_
