#include "model/weights/flat_parameters.h"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#if KFORGE_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/decoder_weights.h"
#include "model/transformer/torch_status.h"
#include "model/weights/weight_dtype.h"

namespace kforge {
namespace {

// Each parameter starts on this boundary: vectorised kernels and cuBLAS read
// aligned rows, as they did from the tensors' own allocations.
constexpr int64_t kAlignBytes = 256;

int64_t AlignUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// FNV-1a: the same in every process and build, unlike absl::Hash, since the
// learner and its workers compare layouts.
void HashInto(uint64_t* hash, absl::string_view text) {
  for (unsigned char c : text) {
    *hash ^= c;
    *hash *= 1099511628211ull;
  }
}

struct Group {
  at::ScalarType dtype;
  std::string name;
  std::vector<at::Tensor> tensors;
  std::vector<int64_t> offsets;  // in elements
  int64_t elements = 0;
};

}  // namespace

struct FlatParameters::Storage {
  std::vector<at::Tensor> flat;  // one 1-D tensor per dtype
};

FlatParameters::FlatParameters(std::unique_ptr<Storage> storage, std::vector<Buffer> buffers,
                               uint64_t places_hash, int device_index)
    : storage_(std::move(storage)),
      buffers_(std::move(buffers)),
      places_hash_(places_hash),
      device_index_(device_index) {}

FlatParameters::~FlatParameters() = default;

absl::StatusOr<std::unique_ptr<FlatParameters>> FlatParameters::Create(DecoderModel* model) {
  c10::NoGradGuard no_grad;
  std::vector<Group> groups;
  absl::flat_hash_set<const void*> seen;
  uint64_t places_hash = 14695981039346656037ull;
  for (auto& [name, tensor] : model->NamedParameters()) {
    if (!seen.insert(tensor.unsafeGetTensorImpl()).second) continue;
    KF_ASSIGN_OR_RETURN(std::string dtype, WeightDtypeName(tensor.scalar_type()));
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const Group& g) { return g.dtype == tensor.scalar_type(); });
    if (group == groups.end()) {
      groups.push_back({.dtype = tensor.scalar_type(), .name = std::move(dtype)});
      group = groups.end() - 1;
    }
    // A tensor that followed the previous one in memory still does (the
    // decoder's stacked q/k/v and gate/up, decoder_layer.cc); any other
    // starts on an aligned boundary.
    const bool follows = !group->tensors.empty() && FollowsInMemory(group->tensors.back(), tensor);
    const int64_t align = kAlignBytes / static_cast<int64_t>(tensor.element_size());
    if (!follows) group->elements = AlignUp(group->elements, align);
    group->offsets.push_back(group->elements);
    HashInto(&places_hash, absl::StrCat(name, ":", group->name, c10::str(tensor.sizes()), "@",
                                        group->elements, ";"));
    group->elements += tensor.numel();
    group->tensors.push_back(tensor);
  }
  auto storage = std::make_unique<Storage>();
  std::vector<Buffer> buffers;
  const at::Device device = model->options().device;
  absl::Status moved = TorchCall("flattening the parameters", [&]() -> absl::Status {
    for (Group& group : groups) {
      at::Tensor flat = at::empty({group.elements}, at::TensorOptions().dtype(group.dtype).device(device));
      for (size_t i = 0; i < group.tensors.size(); ++i) {
        at::Tensor& tensor = group.tensors[i];
        at::Tensor place = flat.narrow(0, group.offsets[i], tensor.numel()).view(tensor.sizes());
        place.copy_(tensor);
        tensor.set_data(place);
      }
      buffers.push_back({.dtype = group.name,
                         .data = flat.data_ptr(),
                         .bytes = group.elements * static_cast<int64_t>(flat.element_size())});
      storage->flat.push_back(std::move(flat));
    }
    return absl::OkStatus();
  });
  KF_RETURN_IF_ERROR(moved);
  groups.clear();  // the last references to the old storage
#if KFORGE_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  return std::unique_ptr<FlatParameters>(new FlatParameters(
      std::move(storage), std::move(buffers), places_hash, device.is_cuda() ? device.index() : -1));
}

int64_t FlatParameters::bytes() const {
  int64_t total = 0;
  for (const Buffer& buffer : buffers_) total += buffer.bytes;
  return total;
}

std::string FlatParameters::Layout() const {
  return absl::StrCat(absl::StrJoin(buffers_, ",",
                                    [](std::string* out, const Buffer& buffer) {
                                      absl::StrAppend(out, buffer.dtype, ":", buffer.bytes);
                                    }),
                      "@", absl::Hex(places_hash_, absl::kZeroPad16));
}

}  // namespace kforge
