// Weights as a stream of kforge.v1.WeightChunk messages: what
// LearnerService.GetWeights sends where NCCL is absent (CPU runs, tests,
// workers that join late), and what a rollout worker applies.
//
//   // learner
//   KF_ASSIGN_OR_RETURN(auto chunker, WeightChunker::Create(policy, version, 4 << 20));
//   v1::WeightChunk chunk;
//   while (chunker->Next(&chunk)) writer->Write(chunk);
//
//   // rollout worker
//   KF_ASSIGN_OR_RETURN(auto assembler, WeightAssembler::Create(model));
//   while (reader->Read(&chunk)) KF_RETURN_IF_ERROR(assembler->Add(chunk));
//   engine->RunBetweenSteps([&] { version = *assembler->Apply(); });
//
// Tensors go in DecoderModel::NamedParameters order, each as raw
// little-endian bytes in its own dtype, split at max_chunk_bytes; the last
// chunk of the last tensor has `last` set. The assembler stages everything on
// the host and changes the model only in Apply, once every parameter arrived
// whole, so a model never runs on a mix of two versions. Errors name the
// tensor and what is wrong (an unknown name, a shape or dtype that does not
// fit, bytes out of order or out of range, a tensor missing, two versions).
//
// Neither is thread-safe; Apply must not overlap a forward pass.
#ifndef KFORGE_MODEL_WEIGHTS_WEIGHT_STREAM_H_
#define KFORGE_MODEL_WEIGHTS_WEIGHT_STREAM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kforge/v1/learner_service.pb.h"

namespace kforge {

class DecoderModel;
class FlatParameters;

// An immutable host copy of a model's parameters at one version of one
// job, taken by the learner after each update, so GetWeights can stream a
// version while the trainer goes on changing the model. Shared by every
// chunker streaming it.
class WeightSnapshot {
 public:
  // With `flat` (the model's parameters re-homed, on a GPU), one copy per
  // flat buffer into pinned host memory, which LibTorch's host allocator
  // hands back for the next snapshot, instead of a copy per tensor into
  // pageable memory: for a 1.5B model a few hundred synchronised copies
  // become one at full PCIe speed (bench/RESULTS.md).
  static absl::StatusOr<std::shared_ptr<const WeightSnapshot>> Capture(
      DecoderModel* model, std::string job_id, int64_t version,
      const FlatParameters* flat = nullptr);
  ~WeightSnapshot();
  const std::string& job_id() const { return job_id_; }
  int64_t version() const { return version_; }
  int64_t bytes() const { return bytes_; }

 private:
  friend class WeightChunker;
  struct Tensors;
  WeightSnapshot(std::unique_ptr<Tensors> tensors, std::string job_id, int64_t version,
                 int64_t bytes);
  std::unique_ptr<Tensors> tensors_;
  std::string job_id_;
  int64_t version_;
  int64_t bytes_;
};

class WeightChunker {
 public:
  // Streams a snapshot; chunks carry its job id and version.
  static absl::StatusOr<std::unique_ptr<WeightChunker>> Create(
      std::shared_ptr<const WeightSnapshot> snapshot, int64_t max_chunk_bytes);
  // INVALID_ARGUMENT for max_chunk_bytes < 1. The model must not change
  // while chunks are taken.
  static absl::StatusOr<std::unique_ptr<WeightChunker>> Create(DecoderModel* model,
                                                               int64_t version,
                                                               int64_t max_chunk_bytes);
  ~WeightChunker();
  // Fills the next chunk; false after the last.
  bool Next(v1::WeightChunk* chunk);

 private:
  struct Source;
  WeightChunker(std::vector<Source> sources, int64_t version, int64_t max_chunk_bytes);

  std::shared_ptr<const WeightSnapshot> snapshot_;  // keeps the sources alive
  std::vector<Source> sources_;
  std::string job_id_;
  const int64_t version_;
  const int64_t max_chunk_bytes_;
  size_t tensor_ = 0;
  int64_t offset_ = 0;
  std::string host_bytes_;  // the current tensor, copied to the host once
};

class WeightAssembler {
 public:
  static absl::StatusOr<std::unique_ptr<WeightAssembler>> Create(DecoderModel* model);
  ~WeightAssembler();

  absl::Status Add(const v1::WeightChunk& chunk);
  // Every parameter complete and the last chunk seen: copies them into the
  // model (converting dtype where the stream's differs) and returns the
  // version. FAILED_PRECONDITION naming a missing or partial tensor.
  absl::StatusOr<int64_t> Apply();
  // The job the stream's chunks named (empty for streams without one), and
  // their version (-1 before the first chunk).
  const std::string& job_id() const { return job_id_; }
  int64_t version() const { return version_; }

 private:
  struct Target;
  explicit WeightAssembler(std::map<std::string, Target> targets);

  std::map<std::string, Target> targets_;
  int64_t version_ = -1;
  std::string job_id_;
  bool saw_last_ = false;
};

}  // namespace kforge

#endif  // KFORGE_MODEL_WEIGHTS_WEIGHT_STREAM_H_
