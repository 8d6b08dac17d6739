#include "model/checkpoint/safetensors.h"

#include <google/protobuf/struct.pb.h>

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"
#include "model/checkpoint/json_fields.h"
#include "model/checkpoint/mapped_file.h"
#include "model/checkpoint/safetensors_header.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using checkpoint::MappedFile;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

struct DtypeInfo {
  TensorDtype dtype;
  const char* name;
  size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {TensorDtype::kF32, "F32", 4},   {TensorDtype::kF16, "F16", 2}, {TensorDtype::kBF16, "BF16", 2},
    {TensorDtype::kF64, "F64", 8},   {TensorDtype::kI64, "I64", 8}, {TensorDtype::kI32, "I32", 4},
    {TensorDtype::kI16, "I16", 2},   {TensorDtype::kI8, "I8", 1},   {TensorDtype::kU8, "U8", 1},
    {TensorDtype::kBool, "BOOL", 1},
};

const DtypeInfo& Info(TensorDtype dtype) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.dtype == dtype) return info;
  }
  return kDtypes[0];  // unreachable: every enumerator is listed
}

class MappedCheckpoint : public SafetensorsCheckpoint {
 public:
  // Maps `file` and adds its tensors; a name seen in an earlier file is DATA_LOSS.
  absl::Status AddFile(const fs::path& file) {
    KF_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::Open(file));
    KF_ASSIGN_OR_RETURN(std::vector<TensorView> views,
                        checkpoint::ParseSafetensors(mapped->bytes(), file));
    for (TensorView& view : views) {
      const auto [it, inserted] = tensors_.try_emplace(view.name, view);
      if (!inserted) {
        return absl::DataLossError(absl::StrCat(file.string(), ": tensor \"", view.name,
                                                "\" is also in ", it->second.file.string()));
      }
    }
    files_.push_back(std::move(mapped));
    return absl::OkStatus();
  }

  const TensorView* Find(const std::string& name) const override {
    const auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }

  std::vector<std::string> Names() const override {
    std::vector<std::string> names;
    names.reserve(tensors_.size());
    for (const auto& [name, view] : tensors_) names.push_back(name);
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::vector<std::unique_ptr<MappedFile>> files_;
  // Filled while opening, read-only after: the views' addresses are stable.
  absl::flat_hash_map<std::string, TensorView> tensors_;
};

// weight_map: tensor name -> shard file name (a plain name inside the dir).
absl::StatusOr<std::map<std::string, std::string>> ReadWeightMap(const fs::path& index) {
  KF_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index.string()));
  absl::StatusOr<google::protobuf::Struct> root = checkpoint::ParseJsonObject(text);
  if (!root.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index.string(), ": malformed JSON: ", root.status().message()));
  }
  const checkpoint::JsonObject json(*root, index.string());
  const google::protobuf::Value* map = json.Find("weight_map");
  if (map == nullptr) return json.FieldError("weight_map", "is missing");
  if (map->kind_case() != google::protobuf::Value::kStructValue) {
    return json.FieldError("weight_map", "is not an object");
  }
  std::map<std::string, std::string> out;
  for (const auto& [name, shard] : map->struct_value().fields()) {
    const std::string& file = shard.string_value();
    if (shard.kind_case() != google::protobuf::Value::kStringValue || file.empty() || file == "." ||
        file == ".." || file.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(index.string(), ": weight_map[\"", name,
                                                     "\"] is not a file name in the folder"));
    }
    out.emplace(name, file);
  }
  return out;
}

absl::Status OpenSharded(const fs::path& dir, MappedCheckpoint* checkpoint) {
  const fs::path index = dir / kIndexFile;
  KF_ASSIGN_OR_RETURN(auto weight_map, ReadWeightMap(index));
  std::map<std::string, std::string> shards;  // shard -> a tensor it should hold
  for (const auto& [name, shard] : weight_map) shards.try_emplace(shard, name);
  for (const auto& [shard, tensor] : shards) {
    std::error_code ec;
    if (!fs::exists(dir / shard, ec)) {
      return absl::NotFoundError(absl::StrCat(index.string(), ": shard \"", shard,
                                              "\" (of tensor \"", tensor, "\") is missing from ",
                                              dir.string()));
    }
    KF_RETURN_IF_ERROR(checkpoint->AddFile(dir / shard));
  }
  for (const auto& [name, shard] : weight_map) {
    const TensorView* view = checkpoint->Find(name);
    if (view == nullptr || view->file.filename() != shard) {
      return absl::DataLossError(absl::StrCat(index.string(), ": tensor \"", name,
                                              "\" is mapped to shard \"", shard,
                                              "\", which does not hold it"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view TensorDtypeName(TensorDtype dtype) { return Info(dtype).name; }

size_t TensorDtypeSize(TensorDtype dtype) { return Info(dtype).size; }

absl::StatusOr<TensorDtype> ParseTensorDtype(absl::string_view name) {
  for (const DtypeInfo& info : kDtypes) {
    if (name == info.name) return info.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "dtype \"", name, "\" is not supported (F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)"));
}

int64_t ElementCount(absl::Span<const int64_t> shape) {
  int64_t count = 1;
  for (const int64_t dim : shape) count *= dim;
  return count;
}

absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> SafetensorsCheckpoint::Open(
    const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(dir.string(), ": no such checkpoint folder"));
  }
  auto checkpoint = std::make_unique<MappedCheckpoint>();
  if (fs::exists(dir / kIndexFile, ec)) {
    KF_RETURN_IF_ERROR(OpenSharded(dir, checkpoint.get()));
  } else if (fs::exists(dir / kSingleFile, ec)) {
    KF_RETURN_IF_ERROR(checkpoint->AddFile(dir / kSingleFile));
  } else {
    return absl::NotFoundError(absl::StrCat(dir.string(), ": no ", kSingleFile, " or ", kIndexFile,
                                            " in the checkpoint folder"));
  }
  return checkpoint;
}

absl::StatusOr<std::unique_ptr<SafetensorsCheckpoint>> SafetensorsCheckpoint::OpenFile(
    const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    return absl::NotFoundError(absl::StrCat(file.string(), ": no such safetensors file"));
  }
  auto checkpoint = std::make_unique<MappedCheckpoint>();
  KF_RETURN_IF_ERROR(checkpoint->AddFile(file));
  return checkpoint;
}

}  // namespace kforge
