#include "model/policy_loader.h"

#include <filesystem>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/transformer/checkpoint_loader.h"
#include "model/transformer/torch_status.h"

namespace kforge {

LoadedPolicy::LoadedPolicy() = default;
LoadedPolicy::~LoadedPolicy() = default;

absl::StatusOr<std::unique_ptr<LoadedPolicy>> LoadPolicy(const std::string& model_path,
                                                         const std::string& device_name,
                                                         const std::string& dtype_name) {
  KF_ASSIGN_OR_RETURN(const at::Device device, TorchCall("device", [&] {
                        return at::Device(device_name);
                      }));
  if (device.is_cuda() && !at::hasCUDA()) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", device_name, ": this LibTorch build has no CUDA"));
  }
  at::ScalarType dtype;
  if (dtype_name == "auto") {
    dtype = device.is_cuda() ? at::kBFloat16 : at::kFloat;
  } else if (dtype_name == "float32") {
    dtype = at::kFloat;
  } else if (dtype_name == "bfloat16") {
    dtype = at::kBFloat16;
  } else if (dtype_name == "float16") {
    dtype = at::kHalf;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype: \"", dtype_name, "\" is not auto, float32, bfloat16 or float16"));
  }
  auto policy = std::make_unique<LoadedPolicy>();
  KF_ASSIGN_OR_RETURN(policy->model, LoadDecoderModel(model_path, {device, dtype}));
  KF_ASSIGN_OR_RETURN(policy->tokenizer,
                      BpeTokenizer::FromFile((std::filesystem::path(model_path) /
                                              "tokenizer.json").string()));
  const ModelConfig& config = policy->model->config();
  policy->description =
      absl::StrCat(config.architecture_name, ", ", config.num_hidden_layers, " layers, ",
                   device.str(), " ", c10::toString(dtype));
  return policy;
}

}  // namespace kforge
