// One rank's membership of an NCCL group that broadcasts FlatParameters:
// the learner is rank 0 and sends, rollout workers receive into their live
// parameters. Every call that waits on other ranks has a deadline: the
// communicator is created non-blocking, its progress is polled, and on a
// deadline or an NCCL error it is aborted (ncclCommAbort), so a dead or stuck
// peer costs a bounded wait and never hangs the caller. An aborted
// communicator is broken for good; the group re-forms with a new one.
//
//   std::string id = *NcclCommunicator::NewUniqueId();               // rank 0, sent to the others
//   auto comm = NcclCommunicator::Join(id, rank, world, device, absl::Seconds(60));
//   KF_RETURN_IF_ERROR((*comm)->Broadcast(*flat, /*root=*/0, 256 << 20, absl::Seconds(30)));
//
// Without NCCL in the build (Available() false) Join and NewUniqueId answer
// UNIMPLEMENTED and weights travel over gRPC. Not thread-safe: one thread
// uses a communicator at a time.
#ifndef KFORGE_MODEL_WEIGHTS_NCCL_COMMUNICATOR_H_
#define KFORGE_MODEL_WEIGHTS_NCCL_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kforge {

class FlatParameters;

class NcclCommunicator {
 public:
  // Whether this build has NCCL.
  static bool Available();
  // The UUID of CUDA device `device_index` as hex, "" for -1 (the CPU) or
  // without NCCL: ranks of one group must be on distinct GPUs.
  static std::string DeviceUuid(int device_index);
  // A new group's id (ncclUniqueId bytes), made by rank 0.
  static absl::StatusOr<std::string> NewUniqueId();
  // Joins group `unique_id` as `rank` of `world_size` on CUDA device
  // `device_index`. DEADLINE_EXCEEDED when the other ranks did not all join
  // within `timeout`; INVALID_ARGUMENT for an id that is not 128 bytes or a
  // rank outside the group.
  // `cancelled`, polled while waiting, ends the wait early (CANCELLED): a
  // process shutting down.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Join(
      const std::string& unique_id, int rank, int world_size, int device_index,
      absl::Duration timeout, const std::function<bool()>& cancelled = nullptr);
  // Aborts rather than finalises: finalising waits on the other ranks, which
  // may be gone.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Broadcasts every buffer of `params` from `root` in pieces of at most
  // `bucket_bytes`, after the work already queued on the device's current
  // stream, and returns once it is complete on this rank. On a timeout or an
  // NCCL error the communicator is aborted and broken, and its kernels have
  // ended when this returns; the buffers of a receiving rank then hold a mix
  // of old and new bytes. A rank-0 broadcast small enough for NCCL's buffers
  // may complete before the others receive it; they receive it in order.
  absl::Status Broadcast(const FlatParameters& params, int root, int64_t bucket_bytes,
                         absl::Duration timeout);
  // The same for one device buffer (benchmarks compare the two).
  absl::Status BroadcastBytes(void* data, int64_t bytes, int root, int64_t bucket_bytes,
                              absl::Duration timeout);

  bool broken() const { return broken_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  struct Handle;
  NcclCommunicator(std::unique_ptr<Handle> handle, int rank, int world_size, int device_index);
  absl::Status BroadcastSpans(const std::vector<std::pair<void*, int64_t>>& spans, int root,
                              int64_t bucket_bytes, absl::Duration timeout);

  std::unique_ptr<Handle> handle_;
  int rank_;
  int world_size_;
  int device_index_;
  bool broken_ = false;
};

}  // namespace kforge

#endif  // KFORGE_MODEL_WEIGHTS_NCCL_COMMUNICATOR_H_
