// Memory-mapped *.safetensors checkpoints, single file or sharded with
// model.safetensors.index.json. No LibTorch here: a tensor is a typed view of
// the mapped bytes; the model code turns views into device tensors.
//
//   absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> ckpt =
//       SafetensorsCheckpoint::Open(dir);
//   const TensorView* w = (*ckpt)->Find("model.embed_tokens.weight");
//
// The views stay valid as long as the checkpoint object lives. Nothing changes
// after Open, so any thread may call Find and Names.
#ifndef KFORGE_MODEL_CHECKPOINT_SAFETENSORS_H_
#define KFORGE_MODEL_CHECKPOINT_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kforge {

// The safetensors dtypes kforge reads ("F32", "F16", "BF16", ...).
enum class TensorDtype { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

// The header's spelling: "F32", "BF16", "BOOL", ...
absl::string_view TensorDtypeName(TensorDtype dtype);
// INVALID_ARGUMENT naming `name` and the supported ones (F8_E4M3 is not).
absl::StatusOr<TensorDtype> ParseTensorDtype(absl::string_view name);
// Bytes per element: 4, 2, 2, 8, 8, 4, 2, 1, 1, 1.
size_t TensorDtypeSize(TensorDtype dtype);
// The product of the dims (1 for a scalar's empty shape).
int64_t ElementCount(absl::Span<const int64_t> shape);

struct TensorView {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<int64_t> shape;
  // Little-endian, row-major. Not necessarily aligned to the element size
  // (the header's length is arbitrary): copy out, do not reinterpret_cast.
  absl::Span<const std::byte> data;
  std::filesystem::path file;  // for error messages
};

class SafetensorsCheckpoint {
 public:
  // dir holds model.safetensors, or model.safetensors.index.json and its
  // shards (the index wins when both are there). Every header is checked:
  // a known dtype, data_offsets inside the file that tile its data region in
  // order with no gap or overlap, and a byte size of shape x itemsize.
  // Errors name the file and, where one is at fault, the tensor: NOT_FOUND
  // for a missing dir, checkpoint or shard; DATA_LOSS for a corrupt header or
  // an index that maps a tensor to a shard without it; INVALID_ARGUMENT for
  // an unsupported dtype or a malformed index.
  static absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> Open(
      const std::filesystem::path& dir);
  // One *.safetensors file by path (optimizer state, for example), with
  // the same checks. NOT_FOUND for a missing file.
  static absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> OpenFile(
      const std::filesystem::path& file);
  virtual ~SafetensorsCheckpoint() = default;

  // nullptr when absent.
  virtual const TensorView* Find(const std::string& name) const = 0;
  virtual std::vector<std::string> Names() const = 0;
};

}  // namespace kforge

#endif  // KFORGE_MODEL_CHECKPOINT_SAFETENSORS_H_
