// Writes *.safetensors files: the tiny-model command's checkpoints and the
// tests' fixtures (a test corrupts the bytes of EncodeSafetensors to make a
// broken file).
//
//   std::vector<TensorToWrite> tensors;
//   tensors.push_back({.name = "model.norm.weight", .dtype = TensorDtype::kF32,
//                      .shape = {64}, .data = FloatsToBytes(ones, TensorDtype::kF32).value()});
//   KF_RETURN_IF_ERROR(WriteSafetensors(dir / "model.safetensors", tensors, {{"format", "pt"}}));
//
// The layout is Hugging Face's: the JSON header padded with spaces to a
// multiple of 8 bytes, then the tensors' bytes in the order given. JSON goes
// through protobuf's printer (ToJson), so any tensor name is quoted right.
#ifndef KFORGE_MODEL_CHECKPOINT_SAFETENSORS_WRITER_H_
#define KFORGE_MODEL_CHECKPOINT_SAFETENSORS_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/checkpoint/safetensors.h"

namespace kforge {

struct TensorToWrite {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;  // little-endian, row-major, shape x itemsize bytes
};

// The whole file in memory. INVALID_ARGUMENT naming the tensor when a name is
// empty, repeated or "__metadata__", or its data is not shape x itemsize.
absl::StatusOr<std::string> EncodeSafetensors(const std::vector<TensorToWrite>& tensors,
                                              const std::map<std::string, std::string>& metadata);

// EncodeSafetensors, written atomically (a temporary file, then rename).
absl::Status WriteSafetensors(const std::filesystem::path& path,
                              const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata);

// model.safetensors.index.json of a sharded folder, as transformers writes
// it: {"metadata": {"total_size": BYTES}, "weight_map": {TENSOR: SHARD}}.
std::string SafetensorsIndexJson(const std::map<std::string, std::string>& weight_map,
                                 uint64_t total_size);

// `values` as little-endian F32, or BF16 rounded to nearest even (NaN kept a
// NaN). INVALID_ARGUMENT for any other dtype.
absl::StatusOr<std::vector<std::byte>> FloatsToBytes(absl::Span<const float> values,
                                                     TensorDtype dtype);

}  // namespace kforge

#endif  // KFORGE_MODEL_CHECKPOINT_SAFETENSORS_WRITER_H_
