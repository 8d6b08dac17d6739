#include "model/transformer/checkpoint_loader.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/checkpoint/model_config.h"
#include "model/transformer/torch_status.h"

namespace kforge {
namespace {

absl::StatusOr<at::ScalarType> TorchDtype(const TensorView& view) {
  switch (view.dtype) {
    case TensorDtype::kF32:
      return at::kFloat;
    case TensorDtype::kF16:
      return at::kHalf;
    case TensorDtype::kBF16:
      return at::kBFloat16;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", view.name, " in ", view.file.string(),
                       ": dtype is not a float type the decoder reads (F32, F16, BF16)"));
  }
}

// A CPU tensor over the mapped bytes (no copy) when they are aligned for the
// element type, else over an aligned copy of them.
at::Tensor CpuView(const TensorView& view, at::ScalarType dtype) {
  void* data = const_cast<std::byte*>(view.data.data());  // read, never written
  const auto options = at::TensorOptions().dtype(dtype);
  if (reinterpret_cast<uintptr_t>(data) % c10::elementSize(dtype) == 0) {
    return at::from_blob(data, view.shape, options);
  }
  at::Tensor aligned = at::empty(view.shape, options);
  std::memcpy(aligned.data_ptr(), data, view.data.size());
  return aligned;
}

}  // namespace

std::optional<std::vector<int64_t>> SafetensorsWeightSource::Shape(const std::string& name) const {
  const TensorView* view = checkpoint_->Find(name);
  if (view == nullptr) return std::nullopt;
  return view->shape;
}

std::string SafetensorsWeightSource::Origin(const std::string& name) const {
  const TensorView* view = checkpoint_->Find(name);
  return view != nullptr ? view->file.string() : absl::StrCat("the checkpoint in ", dir_.string());
}

absl::StatusOr<at::Tensor> SafetensorsWeightSource::Load(const std::string& name,
                                                         const at::TensorOptions& options) const {
  const TensorView* view = checkpoint_->Find(name);
  if (view == nullptr) return absl::NotFoundError(absl::StrCat("tensor ", name));
  KF_ASSIGN_OR_RETURN(const at::ScalarType dtype, TorchDtype(*view));
  if (static_cast<size_t>(ElementCount(view->shape)) * c10::elementSize(dtype) !=
      view->data.size()) {
    return absl::DataLossError(absl::StrCat("tensor ", name, " in ", view->file.string(), ": ",
                                            view->data.size(), " bytes for shape ",
                                            ShapeString(view->shape)));
  }
  // copy=true: the result must own its memory, not alias the mapping.
  return TorchCall(absl::StrCat("loading ", name, " from ", view->file.string()), [&] {
    return CpuView(*view, dtype).to(options, /*non_blocking=*/false, /*copy=*/true);
  });
}

absl::StatusOr<std::unique_ptr<DecoderModel>> LoadDecoderModel(const std::filesystem::path& dir,
                                                               const DecoderOptions& options) {
  KF_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir / "config.json"));
  KF_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsCheckpoint> checkpoint,
                      SafetensorsCheckpoint::Open(dir));
  const SafetensorsWeightSource source(std::move(checkpoint), dir);
  return DecoderModel::Create(config, source, options);
}

}  // namespace kforge
