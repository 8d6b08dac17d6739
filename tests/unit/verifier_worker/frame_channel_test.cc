// FrameChannel against frames a candidate could write into its own socket:
// lengths it chose never cost the verifier more than an error.
#include "verifier_worker/sandbox/frame_channel.h"

#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kforge {
namespace {

// The 16-byte prefix: magic, u32 header length, u64 payload length (little
// endian), then `rest`.
std::string RawFrame(uint32_t header_len, uint64_t payload_len, const std::string& rest) {
  std::string out = "KFRM";
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((payload_len >> (8 * i)) & 0xff));
  return out + rest;
}

TEST(FrameChannelTest, LengthsWhoseSumWrapsAreRefusedNotAllocated) {
  auto pair = FrameChannel::Pair();
  ASSERT_TRUE(pair.ok()) << pair.status();
  // 2 + (2^64 - 2) wraps to 0, under any limit.
  const std::string bytes = RawFrame(2, ~uint64_t{0} - 1, "{}");
  ASSERT_EQ(::send(pair->second.fd(), bytes.data(), bytes.size(), 0),
            static_cast<ssize_t>(bytes.size()));
  absl::StatusOr<Frame> got = pair->first.Receive(absl::Now() + absl::Seconds(5), 1 << 20);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  EXPECT_NE(got.status().message().find("exceeds the limit"), std::string::npos) << got.status();
}

TEST(FrameChannelTest, AHeaderOrPayloadOverTheLimitIsRefused) {
  for (const auto& [header_len, payload_len] :
       {std::pair<uint32_t, uint64_t>{0xffffffffu, 0}, {2, uint64_t{1} << 21}}) {
    auto pair = FrameChannel::Pair();
    ASSERT_TRUE(pair.ok()) << pair.status();
    const std::string bytes = RawFrame(header_len, payload_len, "{}");
    ASSERT_EQ(::send(pair->second.fd(), bytes.data(), bytes.size(), 0),
              static_cast<ssize_t>(bytes.size()));
    absl::StatusOr<Frame> got = pair->first.Receive(absl::Now() + absl::Seconds(5), 1 << 20);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << header_len << " " << payload_len;
  }
}

}  // namespace
}  // namespace kforge
