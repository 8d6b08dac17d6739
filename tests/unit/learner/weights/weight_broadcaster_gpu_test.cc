// The learner's side of the NCCL weight broadcast with a real communicator
// on one GPU, and workers played by SyncBroadcast calls as a worker's
// receiver makes them: one that is offered a group and never joins costs the
// learner one form timeout, is not offered that generation again after it
// says it failed, and is then backed off, so the next update does not wait
// for it; workers on the learner's GPU or of another layout are told why
// they stay out. (A group that forms needs a second GPU:
// tests/integration/mesh_nccl_test.cc.)
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <torch/cuda.h>

#include "absl/time/clock.h"
#include "common/config/proto_defaults.h"
#include "learner/weights/weight_broadcaster.h"
#include "model/weights/flat_parameters.h"
#include "model/weights/nccl_communicator.h"
#include "tests/support/tiny_decoder.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

class WeightBroadcasterGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NcclCommunicator::Available()) GTEST_SKIP() << "this build has no NCCL";
    if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a GPU";
    ASSERT_TRUE(ApplyProtoDefaults(&config_).ok());
    config_.set_broadcast_form_timeout_s(2);
    config_.set_broadcast_timeout_s(2);
    model_ = testing::TinyDecoder(Architecture::kQwen2, 1, at::kBFloat16, at::Device(at::kCUDA, 0));
    auto flat = FlatParameters::Create(model_.get());
    ASSERT_TRUE(flat.ok()) << flat.status();
    flat_ = *std::move(flat);
  }

  v1::SyncBroadcastRequest Poll(const std::string& worker, const std::string& gpu) const {
    v1::SyncBroadcastRequest request;
    request.set_worker_id(worker);
    request.set_layout(flat_->Layout());
    request.set_device_uuid(gpu);
    return request;
  }

  v1::LearnerConfig config_;
  prometheus::Registry registry_;
  LearnerMetrics metrics_{registry_};
  std::unique_ptr<DecoderModel> model_;
  std::unique_ptr<FlatParameters> flat_;
};

TEST_F(WeightBroadcasterGpuTest, AWorkerThatNeverJoinsCostsOneFormTimeoutAndIsThenLeftOut) {
  WeightBroadcaster broadcaster(config_, &metrics_);
  broadcaster.SetSource(flat_.get());
  v1::SyncBroadcastResponse first;
  // The worker's poll is open when the update comes: it is eligible.
  std::thread worker([&] {
    ASSERT_TRUE(broadcaster.Sync(Poll("w1", "another-gpu"), absl::Seconds(20),
                                 [] { return false; }, &first).ok());
  });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time started = absl::Now();
  const absl::Status sent = broadcaster.Broadcast("job-1", 1);
  worker.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(sent)) << sent;
  EXPECT_THAT(sent.message(), HasSubstr("w1"));
  EXPECT_LT(absl::Now() - started, absl::Seconds(15));
  // It was offered the group: rank 1 of 2, with the learner's NCCL id.
  ASSERT_TRUE(first.has_group()) << first.DebugString();
  EXPECT_EQ(first.group().rank(), 1);
  EXPECT_EQ(first.group().world_size(), 2);
  EXPECT_EQ(first.group().nccl_unique_id().size(), 128u);
  EXPECT_EQ(first.group().timeout_ms(), 2000);

  // It says its join failed: it is not offered anything and backed off, so
  // the next update does not wait for it.
  v1::SyncBroadcastRequest failed = Poll("w1", "another-gpu");
  failed.set_error("joining: the group did not form");
  failed.set_failed_generation(first.group().generation());
  failed.set_join_failed(true);
  v1::SyncBroadcastResponse second;
  ASSERT_TRUE(broadcaster.Sync(failed, absl::Milliseconds(300), [] { return false; }, &second).ok());
  EXPECT_FALSE(second.has_group());
  const absl::Time again = absl::Now();
  EXPECT_TRUE(broadcaster.Broadcast("job-1", 2).ok());
  EXPECT_LT(absl::Now() - again, absl::Seconds(1));
  EXPECT_TRUE(broadcaster.members().empty());
}

TEST_F(WeightBroadcasterGpuTest, WorkersOnTheLearnersGpuOrOfAnotherLayoutAreToldWhy) {
  WeightBroadcaster broadcaster(config_, &metrics_);
  broadcaster.SetSource(flat_.get());
  v1::SyncBroadcastResponse same_gpu;
  ASSERT_TRUE(broadcaster.Sync(Poll("w1", NcclCommunicator::DeviceUuid(0)), absl::Seconds(20),
                               [] { return false; }, &same_gpu).ok());
  EXPECT_THAT(same_gpu.not_member_reason(), HasSubstr("learner's GPU"));
  v1::SyncBroadcastRequest other = Poll("w2", "another-gpu");
  other.set_layout("fp32:1024@0000000000000000");
  v1::SyncBroadcastResponse other_layout;
  ASSERT_TRUE(broadcaster.Sync(other, absl::Seconds(20), [] { return false; }, &other_layout).ok());
  EXPECT_THAT(other_layout.not_member_reason(), HasSubstr("fp32:1024"));
  EXPECT_THAT(other_layout.not_member_reason(), HasSubstr(flat_->Layout()));
  // Neither is waited for.
  EXPECT_TRUE(broadcaster.Broadcast("job-1", 1).ok());
  EXPECT_TRUE(broadcaster.members().empty());
}

}  // namespace
}  // namespace kforge
