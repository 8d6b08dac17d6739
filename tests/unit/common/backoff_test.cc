// Back-off: doubles from the first wait to the cap, starts over after a
// success, and can be held at the cap.
#include "common/client/backoff.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

TEST(BackoffTest, DoublesUpToTheCapAndStartsOverAfterASuccess) {
  Backoff backoff(absl::Milliseconds(200), absl::Seconds(1));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(200));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(400));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(800));
  EXPECT_EQ(backoff.Next(), absl::Seconds(1));
  EXPECT_EQ(backoff.Next(), absl::Seconds(1));
  backoff.Reset();
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(200));
}

TEST(BackoffTest, SaturateWaitsTheLongestUntilReset) {
  Backoff backoff(absl::Milliseconds(100), absl::Seconds(5));
  backoff.Saturate();
  EXPECT_EQ(backoff.Next(), absl::Seconds(5));
  EXPECT_EQ(backoff.Next(), absl::Seconds(5));
  backoff.Reset();
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, TakesTheProcesssRpcPolicy) {
  kforge::v1::RpcPolicy policy;
  policy.set_backoff_initial_s(0.5);
  policy.set_backoff_max_s(1.5);
  Backoff backoff(policy);
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(500));
  EXPECT_EQ(backoff.Next(), absl::Seconds(1));
  EXPECT_EQ(backoff.Next(), absl::Milliseconds(1500));
  // A first wait above the cap (the config allows it) is waited once.
  Backoff inverted(absl::Seconds(2), absl::Seconds(1));
  EXPECT_EQ(inverted.Next(), absl::Seconds(2));
  EXPECT_EQ(inverted.Next(), absl::Seconds(1));
}

}  // namespace
}  // namespace kforge
