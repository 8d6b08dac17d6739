#include "model/checkpoint/safetensors_writer.h"

#include <bit>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"
#include "model/checkpoint/json_fields.h"

namespace kforge {
namespace {

using checkpoint::JsonQuote;

absl::Status CheckTensor(const TensorToWrite& tensor, absl::flat_hash_set<std::string>* seen) {
  if (tensor.name.empty() || tensor.name == "__metadata__") {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors: tensor name \"", tensor.name, "\" is reserved or empty"));
  }
  if (!seen->insert(tensor.name).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors: tensor \"", tensor.name, "\" is given twice"));
  }
  for (const int64_t dim : tensor.shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("safetensors: tensor \"", tensor.name, "\" has a negative dim ", dim));
    }
  }
  const int64_t bytes =
      ElementCount(tensor.shape) * static_cast<int64_t>(TensorDtypeSize(tensor.dtype));
  if (bytes != static_cast<int64_t>(tensor.data.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("safetensors: tensor \"", tensor.name, "\" has ", tensor.data.size(),
                     " bytes of data; shape [", absl::StrJoin(tensor.shape, ", "), "] of ",
                     TensorDtypeName(tensor.dtype), " needs ", bytes));
  }
  return absl::OkStatus();
}

std::string Header(const std::vector<TensorToWrite>& tensors,
                   const std::map<std::string, std::string>& metadata) {
  std::vector<std::string> entries;
  if (!metadata.empty()) {
    std::vector<std::string> pairs;
    for (const auto& [key, value] : metadata) {
      pairs.push_back(absl::StrCat(JsonQuote(key), ":", JsonQuote(value)));
    }
    entries.push_back(absl::StrCat("\"__metadata__\":{", absl::StrJoin(pairs, ","), "}"));
  }
  size_t offset = 0;
  for (const TensorToWrite& tensor : tensors) {
    entries.push_back(absl::StrCat(JsonQuote(tensor.name), ":{\"dtype\":\"",
                                   TensorDtypeName(tensor.dtype), "\",\"shape\":[",
                                   absl::StrJoin(tensor.shape, ","), "],\"data_offsets\":[", offset,
                                   ",", offset + tensor.data.size(), "]}"));
    offset += tensor.data.size();
  }
  std::string header = absl::StrCat("{", absl::StrJoin(entries, ","), "}");
  // Padding to 8 bytes keeps the data region aligned for 8-byte dtypes.
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

uint16_t ToBfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // a quiet NaN stays NaN
  }
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace

absl::StatusOr<std::string> EncodeSafetensors(const std::vector<TensorToWrite>& tensors,
                                              const std::map<std::string, std::string>& metadata) {
  absl::flat_hash_set<std::string> seen;
  size_t data_size = 0;
  for (const TensorToWrite& tensor : tensors) {
    KF_RETURN_IF_ERROR(CheckTensor(tensor, &seen));
    data_size += tensor.data.size();
  }
  const std::string header = Header(tensors, metadata);
  std::string file;
  file.reserve(8 + header.size() + data_size);
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i, length >>= 8) file.push_back(static_cast<char>(length & 0xFF));
  file += header;
  for (const TensorToWrite& tensor : tensors) {
    file.append(reinterpret_cast<const char*>(tensor.data.data()), tensor.data.size());
  }
  return file;
}

absl::Status WriteSafetensors(const std::filesystem::path& path,
                              const std::vector<TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  KF_ASSIGN_OR_RETURN(std::string file, EncodeSafetensors(tensors, metadata));
  return WriteFileAtomically(path.string(), file);
}

absl::StatusOr<std::vector<std::byte>> FloatsToBytes(absl::Span<const float> values,
                                                     TensorDtype dtype) {
  static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");
  std::vector<std::byte> out;
  if (dtype == TensorDtype::kF32) {
    out.resize(values.size() * sizeof(float));
    if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  if (dtype == TensorDtype::kBF16) {
    out.resize(values.size() * sizeof(uint16_t));
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t half = ToBfloat16(values[i]);
      std::memcpy(out.data() + 2 * i, &half, sizeof(half));
    }
    return out;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("FloatsToBytes: dtype ", TensorDtypeName(dtype), " is not F32 or BF16"));
}

}  // namespace kforge
