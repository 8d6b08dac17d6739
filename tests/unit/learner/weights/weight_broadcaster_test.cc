// The learner's SyncBroadcast answers where no NCCL group can exist: the
// reason, at once (so a worker does not wait a long poll for nothing), and
// a clear error for a request without its worker. The group itself (forming,
// broadcasting, re-forming after a dead member) needs GPUs:
// tests/unit/model/weights/nccl_communicator_test.cc and the GPU mesh run.
#include "learner/weights/weight_broadcaster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "absl/time/clock.h"
#include "common/config/proto_defaults.h"
#include "model/weights/nccl_communicator.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

v1::LearnerConfig DefaultConfig() {
  v1::LearnerConfig config;
  EXPECT_TRUE(ApplyProtoDefaults(&config).ok());
  return config;
}

v1::SyncBroadcastRequest Poll(const std::string& worker) {
  v1::SyncBroadcastRequest request;
  request.set_worker_id(worker);
  request.set_layout("bf16:1024");
  request.set_wait_ms(30'000);
  return request;
}

class WeightBroadcasterTest : public ::testing::Test {
 protected:
  prometheus::Registry registry_;
  LearnerMetrics metrics_{registry_};
};

TEST_F(WeightBroadcasterTest, BroadcastOffAnswersAtOnceWithTheReason) {
  v1::LearnerConfig config = DefaultConfig();
  config.set_nccl_broadcast(false);
  WeightBroadcaster broadcaster(config, &metrics_);
  v1::SyncBroadcastResponse response;
  const absl::Time started = absl::Now();
  ASSERT_TRUE(broadcaster.Sync(Poll("w1"), absl::Seconds(30), [] { return false; }, &response).ok());
  EXPECT_LT(absl::Now() - started, absl::Seconds(5));
  EXPECT_THAT(response.not_member_reason(), HasSubstr("nccl_broadcast is off"));
  EXPECT_FALSE(response.has_group());
}

TEST_F(WeightBroadcasterTest, ABuildWithoutNcclSaysSo) {
  if (NcclCommunicator::Available()) GTEST_SKIP() << "this build has NCCL";
  WeightBroadcaster broadcaster(DefaultConfig(), &metrics_);
  v1::SyncBroadcastResponse response;
  ASSERT_TRUE(broadcaster.Sync(Poll("w1"), absl::Seconds(30), [] { return false; }, &response).ok());
  EXPECT_THAT(response.not_member_reason(), HasSubstr("without NCCL"));
}

TEST_F(WeightBroadcasterTest, APollWithoutItsWorkerIsRefused) {
  WeightBroadcaster broadcaster(DefaultConfig(), &metrics_);
  v1::SyncBroadcastResponse response;
  const absl::Status status =
      broadcaster.Sync(Poll(""), absl::Seconds(1), [] { return false; }, &response);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("worker_id"));
}

TEST_F(WeightBroadcasterTest, WithNoJobAPollWaitsAndACancelledOneEndsEarly) {
  if (!NcclCommunicator::Available()) GTEST_SKIP() << "without NCCL every poll answers at once";
  WeightBroadcaster broadcaster(DefaultConfig(), &metrics_);
  v1::SyncBroadcastResponse response;
  const absl::Time started = absl::Now();
  ASSERT_TRUE(broadcaster.Sync(Poll("w1"), absl::Milliseconds(300), [] { return false; }, &response).ok());
  EXPECT_GE(absl::Now() - started, absl::Milliseconds(300));
  EXPECT_FALSE(response.has_group());
  EXPECT_FALSE(response.has_broadcast());
  const absl::Status cancelled =
      broadcaster.Sync(Poll("w1"), absl::Seconds(30), [] { return true; }, &response);
  EXPECT_TRUE(absl::IsCancelled(cancelled)) << cancelled;
}

}  // namespace
}  // namespace kforge
