// The header of one *.safetensors file: an 8-byte little-endian length N,
// N bytes of JSON ({"NAME": {"dtype", "shape", "data_offsets"}, ...,
// "__metadata__": {...}}), then the data region the offsets index.
// Internal to model/checkpoint; SafetensorsCheckpoint is the public face.
#ifndef KFORGE_MODEL_CHECKPOINT_SAFETENSORS_HEADER_H_
#define KFORGE_MODEL_CHECKPOINT_SAFETENSORS_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/checkpoint/safetensors.h"

namespace kforge::checkpoint {

// The safetensors format's own bound on the header, against a corrupt length
// making us parse gigabytes.
inline constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// Views into `file_bytes` (the whole file, which must outlive them), in no
// particular order. DATA_LOSS naming `file` and the tensor for a corrupt
// header; INVALID_ARGUMENT for an unsupported dtype.
absl::StatusOr<std::vector<TensorView>> ParseSafetensors(absl::Span<const std::byte> file_bytes,
                                                         const std::filesystem::path& file);

}  // namespace kforge::checkpoint

#endif  // KFORGE_MODEL_CHECKPOINT_SAFETENSORS_HEADER_H_
