// Loading a decoder from a Hugging Face checkpoint directory (config.json
// and *.safetensors). The only place the safetensors views become LibTorch
// tensors.
//
//   absl::StatusOr<std::unique_ptr<DecoderModel>> model =
//       LoadDecoderModel("/models/Qwen2.5-0.5B", {at::kCUDA, at::kBFloat16});
//
// Each tensor is converted from the mapped file (F32, F16 or BF16) straight
// to the target device and dtype, one at a time, so host memory peaks at one
// tensor. Errors name the tensor and its file.
#ifndef KFORGE_MODEL_TRANSFORMER_CHECKPOINT_LOADER_H_
#define KFORGE_MODEL_TRANSFORMER_CHECKPOINT_LOADER_H_

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint/safetensors.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/decoder_weights.h"

namespace kforge {

// A WeightSource over an open safetensors checkpoint.
class SafetensorsWeightSource : public WeightSource {
 public:
  // dir: the checkpoint's folder, named in errors about tensors it lacks.
  SafetensorsWeightSource(std::unique_ptr<SafetensorsCheckpoint> checkpoint,
                          std::filesystem::path dir)
      : checkpoint_(std::move(checkpoint)), dir_(std::move(dir)) {}
  std::optional<std::vector<int64_t>> Shape(const std::string& name) const override;
  absl::StatusOr<at::Tensor> Load(const std::string& name,
                                  const at::TensorOptions& options) const override;
  std::string Origin(const std::string& name) const override;

 private:
  std::unique_ptr<SafetensorsCheckpoint> checkpoint_;
  std::filesystem::path dir_;
};

// dir/config.json + dir's safetensors -> a model on options.device.
absl::StatusOr<std::unique_ptr<DecoderModel>> LoadDecoderModel(const std::filesystem::path& dir,
                                                               const DecoderOptions& options);

}  // namespace kforge

#endif  // KFORGE_MODEL_TRANSFORMER_CHECKPOINT_LOADER_H_
