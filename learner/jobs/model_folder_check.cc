#include "learner/jobs/model_folder_check.h"

#include <filesystem>

#include <google/protobuf/struct.pb.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

constexpr const char* kSupportedArchitectures[] = {"Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                                   "LlamaForCausalLM"};

bool IsSupported(const std::string& architecture) {
  for (const char* supported : kSupportedArchitectures) {
    if (architecture == supported) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<ModelFolderInfo> CheckModelFolder(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a directory"));
  }
  const std::string config_path = (fs::path(path) / "config.json").string();
  auto text = ReadFileToString(config_path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model folder lacks config.json: ",
                                                   text.status().message()));
  }
  google::protobuf::Struct config;
  if (absl::Status parsed = ParseJsonMessage(*text, &config); !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(config_path, ": ", parsed.message()));
  }
  const auto& fields = config.fields();
  auto it = fields.find("architectures");
  if (it == fields.end() || !it->second.has_list_value() ||
      it->second.list_value().values_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(config_path, ": no \"architectures\" list"));
  }
  ModelFolderInfo info;
  info.architecture = it->second.list_value().values(0).string_value();
  if (!IsSupported(info.architecture)) {
    return absl::InvalidArgumentError(absl::StrCat(
        config_path, ": architecture \"", info.architecture, "\" is not supported (supported: ",
        absl::StrJoin(kSupportedArchitectures, ", "), ")"));
  }
  if (!fs::exists(fs::path(path) / "tokenizer.json", ec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": tokenizer.json is missing"));
  }
  info.sharded = fs::exists(fs::path(path) / "model.safetensors.index.json", ec);
  if (!info.sharded && !fs::exists(fs::path(path) / "model.safetensors", ec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": no weights (model.safetensors or model.safetensors.index.json)"));
  }
  return info;
}

}  // namespace kforge
