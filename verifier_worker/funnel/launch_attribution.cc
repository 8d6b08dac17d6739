#include "verifier_worker/funnel/launch_attribution.h"

#include <algorithm>
#include <array>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kforge {
namespace {

using v1::LaunchOrigin;

// ATen operators that allocate, fill, copy, convert, view or read back a
// value: the bookkeeping around a kernel, never the computation asked for.
// Anything else ATen runs in forward is library compute.
const absl::flat_hash_set<std::string>& MemoryOps() {
  static const auto* ops = new absl::flat_hash_set<std::string>{
      // allocation and fill
      "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
      "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
      "fill_", "zero_", "scalar_tensor", "arange", "lift", "lift_fresh", "lift_fresh_copy",
      "resize_", "resize_as_", "set_", "pin_memory", "_pin_memory", "is_pinned",
      // views and layout
      "detach", "detach_", "alias", "view", "view_as", "_unsafe_view", "reshape",
      "_reshape_alias", "as_strided", "as_strided_", "expand", "expand_as", "t", "transpose",
      "permute", "squeeze", "unsqueeze", "flatten", "unflatten", "select", "slice", "narrow",
      "split", "split_with_sizes", "chunk", "unbind", "movedim", "diagonal", "unfold",
      "view_as_real", "view_as_complex", "_has_compatible_shallow_copy_type", "result_type",
      // copies, conversion and concatenation (data movement)
      "contiguous", "clone", "copy_", "to", "_to_copy", "type_as", "cat", "stack",
      "constant_pad_nd", "pad", "broadcast_to", "swapaxes", "swapdims", "adjoint",
      "numpy_T", "matrix_H", "repeat",
      // reading a value back to the host
      "item", "_local_scalar_dense", "is_nonzero"};
  return *ops;
}

// Substrings of GPU kernel names that move or initialise memory: memcpy and
// memset activities, ATen's fill and copy (including dtype conversion and
// transposing copies) kernels, concatenation, arange's index kernel.
constexpr std::array<absl::string_view, 9> kMemoryKernelMarks = {
    "Memcpy", "Memset", "memcpy", "memset", "FillFunctor", "fill_kernel",
    "direct_copy_kernel", "CatArrayBatchedCopy", "elementwise_kernel_with_index"};

// "aten::add.Tensor" -> "add".
absl::string_view OpBase(absl::string_view name) {
  absl::ConsumePrefix(&name, "aten::");
  return name.substr(0, name.find('.'));
}

// Triton 3 names a kernel exactly after its function; Triton 2 appended its
// argument specialisation ("_0d1d2de"). Nothing looser: a candidate kernel
// named "sm90" must not make cuBLAS's sm90_* kernels its own.
bool IsOwnKernel(absl::string_view name, const std::vector<std::string>& own) {
  return std::any_of(own.begin(), own.end(), [&](const std::string& k) {
    if (k.empty()) return false;
    if (name == k) return true;
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, k) || !absl::ConsumePrefix(&rest, "_") || rest.empty()) {
      return false;
    }
    return std::all_of(rest.begin(), rest.end(), [](char c) {
      return absl::ascii_isdigit(c) || c == 'c' || c == 'd' || c == 'e';
    });
  });
}

bool TaskAllows(LaunchKind kind, absl::string_view name, const std::vector<std::string>& allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
    if (a.empty()) return false;
    if (kind == LaunchKind::kOp) return OpBase(name) == OpBase(a);
    return absl::StrContains(name, a);
  });
}

}  // namespace

LaunchOrigin ClassifyLaunch(LaunchKind kind, absl::string_view name,
                            const std::vector<std::string>& own_kernels,
                            const std::vector<std::string>& task_allowed) {
  if (kind == LaunchKind::kKernel) {
    if (IsOwnKernel(name, own_kernels)) return v1::LAUNCH_OWN_TRITON;
    for (absl::string_view mark : kMemoryKernelMarks) {
      if (absl::StrContains(name, mark)) return v1::LAUNCH_MEMORY;
    }
  } else if (MemoryOps().contains(OpBase(name))) {
    return v1::LAUNCH_MEMORY;
  }
  if (TaskAllows(kind, name, task_allowed)) return v1::LAUNCH_ALLOWED_BY_TASK;
  return v1::LAUNCH_LIBRARY_COMPUTE;
}

LaunchAttribution::RunFacts LaunchAttribution::Add(const google::protobuf::Value& launches) {
  ++runs_;
  RunFacts facts;
  for (const google::protobuf::Value& row : launches.list_value().values()) {
    const auto& cells = row.list_value().values();
    if (cells.size() != 4 || !cells[0].has_string_value() || !cells[1].has_string_value()) continue;
    const LaunchKind kind =
        cells[0].string_value() == "kernel" ? LaunchKind::kKernel : LaunchKind::kOp;
    const std::string& name = cells[1].string_value();
    // Counts and times come from the candidate's process: clamped, so a
    // NaN or a huge value cannot become undefined behaviour here.
    const double calls = std::clamp(cells[2].number_value(), 0.0, 1e12);
    const double gpu_us = std::clamp(cells[3].number_value(), 0.0, 1e15);
    auto [it, inserted] = seen_.try_emplace({static_cast<int>(kind), name});
    if (inserted) {
      it->second.kind = kind;
      it->second.origin = ClassifyLaunch(kind, name, own_, allowed_);
    }
    it->second.calls += static_cast<int64_t>(calls);
    it->second.gpu_us += gpu_us;
    if (kind == LaunchKind::kKernel) {
      facts.gpu_us += gpu_us;
      if (absl::StrContains(name, "DtoH") || absl::StrContains(name, "HtoD")) {
        facts.host_transfer_us += gpu_us;
      }
    }
  }
  return facts;
}

std::vector<std::string> LaunchAttribution::LibraryCompute(LaunchKind kind) const {
  std::vector<std::string> out;
  for (const auto& [key, entry] : seen_) {
    if (entry.kind == kind && entry.origin == v1::LAUNCH_LIBRARY_COMPUTE) {
      out.push_back(key.second);
    }
  }
  return out;
}

bool LaunchAttribution::OwnKernelRan() const {
  return std::any_of(seen_.begin(), seen_.end(),
                     [](const auto& kv) { return kv.second.origin == v1::LAUNCH_OWN_TRITON; });
}

bool LaunchAttribution::SawGpuWork() const {
  return std::any_of(seen_.begin(), seen_.end(),
                     [](const auto& kv) { return kv.second.kind == LaunchKind::kKernel; });
}

v1::LaunchAttribution LaunchAttribution::Summary(bool enforced) const {
  v1::LaunchAttribution summary;
  double total = 0, own = 0;
  for (const auto& [key, entry] : seen_) {
    v1::Launch* launch = summary.add_launches();
    launch->set_name(key.second);
    launch->set_origin(entry.origin);
    launch->set_calls(static_cast<int32_t>(entry.calls));
    launch->set_gpu_us(entry.gpu_us);
    total += entry.gpu_us;
    if (entry.origin == v1::LAUNCH_OWN_TRITON) own += entry.gpu_us;
  }
  summary.set_own_gpu_share(total > 0 ? own / total : 0.0);
  summary.set_enforced(enforced);
  summary.set_runs(runs_);
  return summary;
}

}  // namespace kforge
