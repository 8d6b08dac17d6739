// Sends and receives Frames over a connected Unix stream socket, optionally
// with file descriptors attached (SCM_RIGHTS). Owns the socket.
//
//   KF_ASSIGN_OR_RETURN(auto pair, FrameChannel::Pair());
//   pair.first.Send(Frame::Of("ping"));
//   KF_ASSIGN_OR_RETURN(Frame reply, pair.second.Receive(absl::Now() + absl::Seconds(5)));
#ifndef KFORGE_VERIFIER_WORKER_SANDBOX_FRAME_CHANNEL_H_
#define KFORGE_VERIFIER_WORKER_SANDBOX_FRAME_CHANNEL_H_

#include <span>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/process/unique_fd.h"
#include "verifier_worker/sandbox/frame.h"

namespace kforge {

class FrameChannel {
 public:
  explicit FrameChannel(UniqueFd fd) : fd_(std::move(fd)) {}
  // A connected pair (socketpair), both ends close-on-exec.
  static absl::StatusOr<std::pair<FrameChannel, FrameChannel>> Pair();

  // UNAVAILABLE if the peer is gone. `attach_fd` >= 0 travels with the frame.
  absl::Status Send(const Frame& frame, int attach_fd = -1);
  // Up to kMaxAttachedFds descriptors travel with the frame, in order.
  static constexpr size_t kMaxAttachedFds = 4;
  absl::Status Send(const Frame& frame, std::span<const int> attach_fds);
  // DEADLINE_EXCEEDED past `deadline` (absl::InfiniteFuture() to wait
  // forever), UNAVAILABLE when the peer closed, DATA_LOSS on a bad frame.
  // `max_bytes` bounds header plus payload.
  absl::StatusOr<Frame> Receive(absl::Time deadline, uint64_t max_bytes = uint64_t{1} << 34);
  // The same with a deadline that may move while it waits (looked at on
  // every wake-up).
  absl::StatusOr<Frame> Receive(absl::FunctionRef<absl::Time()> deadline,
                                uint64_t max_bytes = uint64_t{1} << 34);

  int fd() const { return fd_.get(); }
  UniqueFd Release() { return std::move(fd_); }

 private:
  absl::Status ReadExact(char* out, size_t n, absl::FunctionRef<absl::Time()> deadline);
  UniqueFd fd_;
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_SANDBOX_FRAME_CHANNEL_H_
