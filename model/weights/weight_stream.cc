#include "model/weights/weight_stream.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/torch_status.h"
#include "model/weights/flat_parameters.h"
#include "model/weights/weight_dtype.h"

namespace kforge {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

struct WeightChunker::Source {
  std::string name;
  at::Tensor tensor;
  std::string dtype;
};

absl::StatusOr<std::unique_ptr<WeightChunker>> WeightChunker::Create(DecoderModel* model,
                                                                     int64_t version,
                                                                     int64_t max_chunk_bytes) {
  if (max_chunk_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_chunk_bytes: ", max_chunk_bytes, " is below 1"));
  }
  std::vector<Source> sources;
  for (auto& [name, tensor] : model->NamedParameters()) {
    KF_ASSIGN_OR_RETURN(std::string dtype, WeightDtypeName(tensor.scalar_type()));
    sources.push_back({name, tensor, std::move(dtype)});
  }
  return std::unique_ptr<WeightChunker>(
      new WeightChunker(std::move(sources), version, max_chunk_bytes));
}

struct WeightSnapshot::Tensors {
  std::vector<std::pair<std::string, at::Tensor>> named;
};

WeightSnapshot::WeightSnapshot(std::unique_ptr<Tensors> tensors, std::string job_id,
                               int64_t version, int64_t bytes)
    : tensors_(std::move(tensors)), job_id_(std::move(job_id)), version_(version), bytes_(bytes) {}

WeightSnapshot::~WeightSnapshot() = default;

namespace {

// The parameters as views of one pinned host copy per flat buffer.
absl::Status CaptureFlat(DecoderModel* model, const FlatParameters& flat,
                         std::vector<std::pair<std::string, at::Tensor>>* named, int64_t* bytes) {
  std::vector<at::Tensor> hosts;
  const at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(flat.device_index()));
  for (const FlatParameters::Buffer& buffer : flat.buffers()) {
    const at::Tensor on_device =
        at::from_blob(buffer.data, {buffer.bytes}, at::TensorOptions().dtype(at::kByte).device(device));
    at::Tensor host = at::empty({buffer.bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    host.copy_(on_device);
    hosts.push_back(std::move(host));
    *bytes += buffer.bytes;
  }
  for (auto& [name, tensor] : model->NamedParameters()) {
    const char* data = static_cast<const char*>(tensor.data_ptr());
    bool found = false;
    for (size_t i = 0; i < hosts.size() && !found; ++i) {
      const char* begin = static_cast<const char*>(flat.buffers()[i].data);
      if (data < begin || data >= begin + flat.buffers()[i].bytes) continue;
      named->emplace_back(name, hosts[i]
                                    .narrow(0, data - begin, static_cast<int64_t>(tensor.nbytes()))
                                    .view(tensor.scalar_type())
                                    .view(tensor.sizes()));
      found = true;
    }
    if (!found) {
      return absl::FailedPreconditionError(
          absl::StrCat("weight snapshot: ", name, " is not in the flat parameter buffers"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const WeightSnapshot>> WeightSnapshot::Capture(
    DecoderModel* model, std::string job_id, int64_t version, const FlatParameters* flat) {
  auto tensors = std::make_unique<Tensors>();
  int64_t bytes = 0;
  KF_RETURN_IF_ERROR(TorchCall("weight snapshot", [&]() -> absl::Status {
    c10::NoGradGuard no_grad;
    if (flat != nullptr && flat->device_index() >= 0) {
      return CaptureFlat(model, *flat, &tensors->named, &bytes);
    }
    for (auto& [name, tensor] : model->NamedParameters()) {
      KF_RETURN_IF_ERROR(WeightDtypeName(tensor.scalar_type()).status());
      at::Tensor copy = tensor.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true)
                            .contiguous();
      bytes += static_cast<int64_t>(copy.nbytes());
      tensors->named.emplace_back(name, std::move(copy));
    }
    return absl::OkStatus();
  }));
  return std::shared_ptr<const WeightSnapshot>(
      new WeightSnapshot(std::move(tensors), std::move(job_id), version, bytes));
}

absl::StatusOr<std::unique_ptr<WeightChunker>> WeightChunker::Create(
    std::shared_ptr<const WeightSnapshot> snapshot, int64_t max_chunk_bytes) {
  if (max_chunk_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_chunk_bytes: ", max_chunk_bytes, " is below 1"));
  }
  std::vector<Source> sources;
  for (const auto& [name, tensor] : snapshot->tensors_->named) {
    KF_ASSIGN_OR_RETURN(std::string dtype, WeightDtypeName(tensor.scalar_type()));
    sources.push_back({name, tensor, std::move(dtype)});
  }
  auto chunker = std::unique_ptr<WeightChunker>(
      new WeightChunker(std::move(sources), snapshot->version(), max_chunk_bytes));
  chunker->job_id_ = snapshot->job_id();
  chunker->snapshot_ = std::move(snapshot);
  return chunker;
}

WeightChunker::WeightChunker(std::vector<Source> sources, int64_t version,
                             int64_t max_chunk_bytes)
    : sources_(std::move(sources)), version_(version), max_chunk_bytes_(max_chunk_bytes) {}

WeightChunker::~WeightChunker() = default;

bool WeightChunker::Next(v1::WeightChunk* chunk) {
  if (tensor_ >= sources_.size()) return false;
  const Source& source = sources_[tensor_];
  if (offset_ == 0) {
    c10::NoGradGuard no_grad;
    const at::Tensor host = source.tensor.detach().to(at::kCPU).contiguous();
    host_bytes_.assign(static_cast<const char*>(host.data_ptr()),
                       static_cast<size_t>(host.numel() * host.element_size()));
  }
  const int64_t total = static_cast<int64_t>(host_bytes_.size());
  const int64_t size = std::min(max_chunk_bytes_, total - offset_);
  chunk->Clear();
  chunk->set_version(version_);
  chunk->set_job_id(job_id_);
  chunk->set_name(source.name);
  chunk->set_dtype(source.dtype);
  for (int64_t d : source.tensor.sizes()) chunk->add_shape(d);
  chunk->set_offset(offset_);
  chunk->set_data(host_bytes_.substr(static_cast<size_t>(offset_), static_cast<size_t>(size)));
  chunk->set_total_bytes(total);
  offset_ += size;
  if (offset_ >= total) {
    ++tensor_;
    offset_ = 0;
  }
  chunk->set_last(tensor_ >= sources_.size());
  return true;
}

struct WeightAssembler::Target {
  at::Tensor parameter;
  std::vector<int64_t> shape;
  std::string dtype;     // of the stream, set by the tensor's first chunk
  std::string staged;    // the tensor's bytes as they arrive
  int64_t received = 0;
};

absl::StatusOr<std::unique_ptr<WeightAssembler>> WeightAssembler::Create(DecoderModel* model) {
  std::map<std::string, Target> targets;
  for (auto& [name, tensor] : model->NamedParameters()) {
    Target target;
    target.parameter = tensor;
    target.shape = tensor.sizes().vec();
    targets.emplace(name, std::move(target));
  }
  return std::unique_ptr<WeightAssembler>(new WeightAssembler(std::move(targets)));
}

WeightAssembler::WeightAssembler(std::map<std::string, Target> targets)
    : targets_(std::move(targets)) {}

WeightAssembler::~WeightAssembler() = default;

absl::Status WeightAssembler::Add(const v1::WeightChunk& chunk) {
  const std::string& name = chunk.name();
  if (version_ < 0) {
    version_ = chunk.version();
    job_id_ = chunk.job_id();
  }
  if (chunk.job_id() != job_id_) {
    return absl::InvalidArgumentError(absl::StrCat("weight chunk of ", name, " is of job \"",
                                                   chunk.job_id(), "\", the stream began with \"",
                                                   job_id_, "\""));
  }
  if (chunk.version() != version_) {
    return absl::InvalidArgumentError(absl::StrCat("weight chunk of ", name, " is version ",
                                                   chunk.version(), ", the stream began with ",
                                                   version_));
  }
  auto it = targets_.find(name);
  if (it == targets_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("weight ", name, ": the model has no such tensor"));
  }
  Target& target = it->second;
  const std::vector<int64_t> shape(chunk.shape().begin(), chunk.shape().end());
  if (shape != target.shape) {
    return absl::InvalidArgumentError(absl::StrCat("weight ", name, ": shape ", ShapeText(shape),
                                                   ", the model's is ", ShapeText(target.shape)));
  }
  KF_ASSIGN_OR_RETURN(const at::ScalarType dtype, WeightDtypeFromName(chunk.dtype()));
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const int64_t total = numel * static_cast<int64_t>(c10::elementSize(dtype));
  if (chunk.total_bytes() != total) {
    return absl::InvalidArgumentError(absl::StrCat("weight ", name, ": total_bytes ",
                                                   chunk.total_bytes(), ", ", ShapeText(shape),
                                                   " in ", chunk.dtype(), " is ", total));
  }
  if (target.received == 0 && chunk.offset() == 0) {
    target.dtype = chunk.dtype();
    target.staged.assign(static_cast<size_t>(total), '\0');
  } else if (chunk.dtype() != target.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("weight ", name, ": dtype changed from ",
                                                   target.dtype, " to ", chunk.dtype()));
  }
  const int64_t size = static_cast<int64_t>(chunk.data().size());
  if (chunk.offset() != target.received || target.received + size > total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "weight ", name, ": ", size, " bytes at offset ", chunk.offset(), "; expected offset ",
        target.received, " of ", total, " bytes"));
  }
  std::memcpy(target.staged.data() + target.received, chunk.data().data(), chunk.data().size());
  target.received += size;
  if (chunk.last()) saw_last_ = true;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> WeightAssembler::Apply() {
  if (!saw_last_) {
    return absl::FailedPreconditionError("weight stream ended before its last chunk");
  }
  for (const auto& [name, target] : targets_) {
    if (target.staged.empty() || target.received != static_cast<int64_t>(target.staged.size())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "weight ", name, ": received ", target.received, " of ", target.staged.size(),
          " bytes"));
    }
  }
  KF_RETURN_IF_ERROR(TorchCall("apply streamed weights", [&]() -> absl::Status {
    c10::NoGradGuard no_grad;
    for (auto& [name, target] : targets_) {
      KF_ASSIGN_OR_RETURN(const at::ScalarType dtype, WeightDtypeFromName(target.dtype));
      const at::Tensor staged = at::from_blob(target.staged.data(), target.shape,
                                              at::TensorOptions().dtype(dtype));
      target.parameter.copy_(staged);
      std::string().swap(target.staged);  // the host copy is done with
      target.received = 0;
    }
    return absl::OkStatus();
  }));
  return version_;
}

}  // namespace kforge
