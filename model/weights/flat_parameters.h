// A model's parameters re-homed into one contiguous buffer per dtype, so the
// NCCL weight broadcast sends and receives the whole model in a few large
// transfers straight from and into the live parameters: no packing on the
// learner, no staging or unpacking on a rollout worker, and the addresses a
// captured CUDA graph reads stay the same.
//
//   KF_ASSIGN_OR_RETURN(std::unique_ptr<FlatParameters> flat, FlatParameters::Create(model));
//   for (const FlatParameters::Buffer& buffer : flat->buffers()) Send(buffer.data, buffer.bytes);
//
// Create copies each parameter into its place in the buffer and points the
// parameter's tensor at it (set_data), so every holder of the tensor (the
// model, an optimiser created before or after) sees the flat storage; the
// old storage is freed. Parameters keep their order (NamedParameters), each
// starting on a 256-byte boundary unless it followed the one before it in
// memory (FollowsInMemory: the decoder's stacked q/k/v and gate/up stay
// stacked); a tied lm_head is the embedding's tensor and is placed once.
// Anything that later replaces a parameter's storage (rather than copying
// into it) would split it from the buffer: the model's code copies into
// parameters (WeightAssembler::Apply, checkpoint loads).
//
// Call before capturing CUDA graphs over the parameters (Create gives the old
// storage back to the device).
#ifndef KFORGE_MODEL_WEIGHTS_FLAT_PARAMETERS_H_
#define KFORGE_MODEL_WEIGHTS_FLAT_PARAMETERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kforge {

class DecoderModel;

class FlatParameters {
 public:
  struct Buffer {
    std::string dtype;  // "bf16", "fp16", "fp32"
    void* data = nullptr;
    int64_t bytes = 0;
  };

  // INVALID_ARGUMENT for a parameter of a dtype weights cannot be sent in.
  static absl::StatusOr<std::unique_ptr<FlatParameters>> Create(DecoderModel* model);
  ~FlatParameters();
  FlatParameters(const FlatParameters&) = delete;
  FlatParameters& operator=(const FlatParameters&) = delete;

  const std::vector<Buffer>& buffers() const { return buffers_; }
  int64_t bytes() const;
  // "bf16:3087467520@5f1c2a9b04d3e871": dtypes and byte counts in order,
  // then a hash of every parameter's name, shape and place. Two models whose
  // layouts are equal (same architecture, shapes and dtypes) can exchange
  // buffers byte for byte.
  std::string Layout() const;
  // The CUDA device the buffers live on; -1 on the CPU.
  int device_index() const { return device_index_; }

 private:
  struct Storage;
  FlatParameters(std::unique_ptr<Storage> storage, std::vector<Buffer> buffers,
                 uint64_t places_hash, int device_index);

  std::unique_ptr<Storage> storage_;  // owns the buffers
  std::vector<Buffer> buffers_;
  uint64_t places_hash_;  // names, shapes and offsets
  int device_index_;
};

}  // namespace kforge

#endif  // KFORGE_MODEL_WEIGHTS_FLAT_PARAMETERS_H_
