// The short dtype names weights travel under ("bf16", "fp16", "fp32"): in
// WeightChunk.dtype and in a FlatParameters layout.
#ifndef KFORGE_MODEL_WEIGHTS_WEIGHT_DTYPE_H_
#define KFORGE_MODEL_WEIGHTS_WEIGHT_DTYPE_H_

#include <string>

#include <c10/core/ScalarType.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace kforge {

inline absl::StatusOr<std::string> WeightDtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16:
      return std::string("bf16");
    case at::kHalf:
      return std::string("fp16");
    case at::kFloat:
      return std::string("fp32");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("weights of dtype ", c10::toString(dtype), " cannot be sent"));
  }
}

inline absl::StatusOr<at::ScalarType> WeightDtypeFromName(const std::string& name) {
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  if (name == "fp32") return at::kFloat;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype \"", name, "\" is not bf16, fp16 or fp32"));
}

}  // namespace kforge

#endif  // KFORGE_MODEL_WEIGHTS_WEIGHT_DTYPE_H_
