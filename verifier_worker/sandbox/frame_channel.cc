#include "verifier_worker/sandbox/frame_channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

constexpr char kMagic[4] = {'K', 'F', 'R', 'M'};
constexpr size_t kPrefixBytes = 16;  // magic, u32 header length, u64 payload length

void PutLe(char* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t GetLe(const char* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= uint64_t{static_cast<unsigned char>(in[i])} << (8 * i);
  return value;
}

absl::Status SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::pair<FrameChannel, FrameChannel>> FrameChannel::Pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  return std::make_pair(FrameChannel(UniqueFd(fds[0])), FrameChannel(UniqueFd(fds[1])));
}

absl::Status FrameChannel::Send(const Frame& frame, int attach_fd) {
  if (attach_fd < 0) return Send(frame, std::span<const int>());
  return Send(frame, std::span<const int>(&attach_fd, 1));
}

absl::Status FrameChannel::Send(const Frame& frame, std::span<const int> attach_fds) {
  if (attach_fds.size() > kMaxAttachedFds) {
    return absl::InvalidArgumentError(
        absl::StrCat(attach_fds.size(), " descriptors on one frame; at most ", kMaxAttachedFds));
  }
  const absl::string_view payload = frame.PayloadBytes();
  const std::string header = ToJson(frame.header, false);
  std::string first(kPrefixBytes, '\0');
  std::memcpy(first.data(), kMagic, 4);
  PutLe(first.data() + 4, header.size(), 4);
  PutLe(first.data() + 8, payload.size(), 8);
  first += header;
  if (!attach_fds.empty()) {
    // The descriptors ride on the first byte of the frame.
    char control[CMSG_SPACE(sizeof(int) * kMaxAttachedFds)] = {};
    iovec iov{first.data(), 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * attach_fds.size());
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * attach_fds.size());
    std::memcpy(CMSG_DATA(cmsg), attach_fds.data(), sizeof(int) * attach_fds.size());
    ssize_t n;
    do {
      n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n != 1) return absl::UnavailableError(absl::StrCat("sendmsg: ", std::strerror(errno)));
    KF_RETURN_IF_ERROR(SendAll(fd_.get(), first.data() + 1, first.size() - 1));
  } else {
    KF_RETURN_IF_ERROR(SendAll(fd_.get(), first.data(), first.size()));
  }
  return SendAll(fd_.get(), payload.data(), payload.size());
}

absl::Status FrameChannel::ReadExact(char* out, size_t n,
                                     absl::FunctionRef<absl::Time()> deadline_now) {
  while (n > 0) {
    int timeout_ms = -1;
    const absl::Time deadline = deadline_now();
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("no answer in time");
      timeout_ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
    }
    pollfd pfd{fd_.get(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) continue;  // re-check the deadline
    const ssize_t got = ::recv(fd_.get(), out, n, 0);
    if (got == 0) return absl::UnavailableError("the peer closed the channel");
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    }
    out += got;
    n -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::StatusOr<Frame> FrameChannel::Receive(absl::Time deadline, uint64_t max_bytes) {
  return Receive([deadline] { return deadline; }, max_bytes);
}

absl::StatusOr<Frame> FrameChannel::Receive(absl::FunctionRef<absl::Time()> deadline,
                                            uint64_t max_bytes) {
  char prefix[kPrefixBytes];
  KF_RETURN_IF_ERROR(ReadExact(prefix, kPrefixBytes, deadline));
  if (std::memcmp(prefix, kMagic, 4) != 0) return absl::DataLossError("bad frame magic");
  const uint64_t header_len = GetLe(prefix + 4, 4);
  const uint64_t payload_len = GetLe(prefix + 8, 8);
  // Each length against the limit on its own: a sum of two lengths the
  // other end chose can wrap (a header of 2 and a payload of 2^64 - 2 bytes
  // summed to 0, and resizing to the payload's length aborted the verifier).
  if (payload_len > max_bytes || header_len > max_bytes - payload_len) {
    return absl::DataLossError(absl::StrCat("frame of ", header_len, " + ", payload_len,
                                            " bytes exceeds the limit ", max_bytes));
  }
  std::string header(header_len, '\0');
  KF_RETURN_IF_ERROR(ReadExact(header.data(), header_len, deadline));
  Frame frame;
  if (absl::Status parsed = ParseJsonMessage(header, &frame.header); !parsed.ok()) {
    return absl::DataLossError(absl::StrCat("bad frame header: ", parsed.message()));
  }
  frame.payload.resize(payload_len);
  KF_RETURN_IF_ERROR(ReadExact(frame.payload.data(), payload_len, deadline));
  return frame;
}

}  // namespace kforge
