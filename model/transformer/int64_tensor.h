// Host int64 values as a 1-d tensor on a device: token ids, slot indices and
// positions on their way to the decoder and its KV cache.
//
//   at::Tensor ids = Int64Tensor(tokens, model.options().device);  // [N]
#ifndef KFORGE_MODEL_TRANSFORMER_INT64_TENSOR_H_
#define KFORGE_MODEL_TRANSFORMER_INT64_TENSOR_H_

#include <cstdint>

#include <ATen/ATen.h>

#include "absl/types/span.h"

namespace kforge {

inline at::Tensor Int64Tensor(absl::Span<const int64_t> values, const at::Device& device) {
  return at::tensor(at::ArrayRef<int64_t>(values.data(), values.size()), at::kLong).to(device);
}

}  // namespace kforge

#endif  // KFORGE_MODEL_TRANSFORMER_INT64_TENSOR_H_
