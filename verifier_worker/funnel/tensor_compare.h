// Compares a candidate kernel's output with the reference output.
//
// Both tensors arrive from separate Python processes as raw little-endian
// bytes plus a dtype and a shape (row-major, contiguous); they are never
// unpickled. The comparison is structural first, then elementwise:
//
//   * Shapes must be equal ("shape [2, 3] != reference [2, 4]"), dtypes must
//     be equal ("dtype float16 != reference float32"), and each byte count
//     must equal numel * DTypeSize.
//   * Floating dtypes: element i passes iff |c - r| <= atol + rtol * |r|,
//     computed in double. Where the reference is NaN the candidate must be
//     NaN; where it is +-Inf the candidate must be the same Inf; a NaN or Inf
//     in the candidate where the reference is finite fails and counts as an
//     infinite error.
//   * Integer and bool dtypes compare exactly; the tolerance is not used.
//   * Empty tensors of equal shape pass.
//
// One pass over the data, no allocation per element: outputs run to
// hundreds of MB. The tolerance comes from the task's config.
//
//   CompareResult result = CompareTensors(
//       {.dtype = DType::kFloat32, .shape = {2, 3}, .bytes = reference_bytes},
//       {.dtype = DType::kFloat32, .shape = {2, 3}, .bytes = candidate_bytes},
//       {.atol = 1e-2, .rtol = 1e-2});
//   if (!result.passed) return Fail(result.message);
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_TENSOR_COMPARE_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_TENSOR_COMPARE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kforge {

enum class DType {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool
};

// Torch's names ("float32", "bfloat16", "bool", ...), with or without the
// "torch." prefix, and torch's aliases ("float", "half", "double", "long",
// "int", "short"). INVALID_ARGUMENT naming the input otherwise.
absl::StatusOr<DType> ParseDType(absl::string_view name);

// Torch's canonical name: "float32", "bfloat16", ...
absl::string_view DTypeName(DType dtype);

// Bytes per element.
size_t DTypeSize(DType dtype);

// IEEE binary16 and bfloat16 bit patterns to float, exactly (subnormals,
// infinities and NaNs included).
float HalfToFloat(uint16_t bits);
float BFloat16ToFloat(uint16_t bits);

// A view of a contiguous tensor; `bytes` is not owned and may be unaligned.
struct TensorView {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;  // empty for a scalar
  absl::string_view bytes;
};

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

struct CompareResult {
  bool passed = false;
  // Over the elements where the reference is finite; +inf when the
  // candidate is NaN or Inf at one of them.
  double max_abs_error = 0;
  // ||c - r||_2 / max(||r||_2, 1e-12) over the same elements.
  double rel_l2_error = 0;
  // Elements that failed; 0 (and index -1) when the structure did not match.
  int64_t mismatched = 0;
  int64_t first_mismatch_index = -1;  // flat, row-major
  // Why it failed, or a one-line summary when it passed.
  std::string message;
};

CompareResult CompareTensors(const TensorView& reference, const TensorView& candidate,
                             Tolerance tol);

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_TENSOR_COMPARE_H_
