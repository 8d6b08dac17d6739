#include "model/checkpoint/safetensors_writer.h"

#include <google/protobuf/struct.pb.h>

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

// A JSON number holds integers exactly up to 2^53 (8 PiB of offsets), and
// protobuf's printer writes them without a fraction or exponent below 1e15.
google::protobuf::Value JsonInteger(uint64_t value) {
  return checkpoint::JsonNumber(static_cast<double>(value));
}

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
  google::protobuf::Struct header;
  auto& fields = *header.mutable_fields();
  if (!metadata.empty()) {
    google::protobuf::Struct pairs;
    for (const auto& [key, value] : metadata) {
      (*pairs.mutable_fields())[key] = checkpoint::JsonString(value);
    }
    fields["__metadata__"] = checkpoint::JsonObjectValue(std::move(pairs));
  }
  size_t offset = 0;
  for (const TensorToWrite& tensor : tensors) {
    std::vector<google::protobuf::Value> shape;
    for (const int64_t dim : tensor.shape) shape.push_back(JsonInteger(dim));
    const size_t end = offset + tensor.data.size();
    fields[tensor.name] = checkpoint::JsonObjectValue(checkpoint::JsonObjectOf(
        {{"dtype", checkpoint::JsonString(TensorDtypeName(tensor.dtype))},
         {"shape", checkpoint::JsonList(std::move(shape))},
         {"data_offsets", checkpoint::JsonList({JsonInteger(offset), JsonInteger(end)})}}));
    offset = end;
  }
  std::string text = ToJson(header, /*multiline=*/false);
  // Padding to 8 bytes keeps the data region aligned for 8-byte dtypes.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
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

std::string SafetensorsIndexJson(const std::map<std::string, std::string>& weight_map,
                                 uint64_t total_size) {
  google::protobuf::Struct map;
  for (const auto& [tensor, shard] : weight_map) {
    (*map.mutable_fields())[tensor] = checkpoint::JsonString(shard);
  }
  const google::protobuf::Struct metadata =
      checkpoint::JsonObjectOf({{"total_size", JsonInteger(total_size)}});
  return checkpoint::JsonText(
      checkpoint::JsonObjectOf({{"metadata", checkpoint::JsonObjectValue(metadata)},
                                {"weight_map", checkpoint::JsonObjectValue(std::move(map))}}));
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
