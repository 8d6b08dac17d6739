// The NCCL path of the weight broadcast on real GPUs. One GPU: a group of
// one completes a broadcast, and a group whose second rank never joins fails
// within its deadline instead of hanging. Two GPUs (the learner's rank 0 on
// cuda:0, a worker's rank 1 on cuda:1, each on its own thread as each would
// be in its own process): the receiver's parameters are byte-identical to
// the sender's after the broadcast, at bucket sizes that split the buffer
// and that do not; a rank that never takes part makes the sender's
// broadcast fail within its deadline, and a new group then works. Each test
// skips, saying why, without the GPUs or NCCL it needs.
#include "model/weights/nccl_communicator.h"

#include <memory>
#include <thread>

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/random_weights.h"
#include "model/weights/flat_parameters.h"
#include "tests/support/tiny_decoder.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<DecoderModel> NewModel(int device, uint64_t seed) {
  return testing::TinyDecoder(Architecture::kQwen2, seed, at::kBFloat16,
                              at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
}

at::Tensor Logits(const DecoderModel& model) { return testing::TinyLogits(model); }

// Why this machine cannot run a test needing `count` GPUs; "" if it can.
std::string MissingGpus(int count) {
  if (!NcclCommunicator::Available()) return "this build has no NCCL";
  if (static_cast<int>(torch::cuda::device_count()) < count) {
    return absl::StrCat("needs ", count, " GPU(s), has ", torch::cuda::device_count());
  }
  return "";
}

#define KF_REQUIRE_GPUS(count)                                                  \
  if (const std::string why = MissingGpus(count); !why.empty()) GTEST_SKIP() << why

TEST(NcclCommunicatorTest, AGroupOfOneBroadcasts) {
  KF_REQUIRE_GPUS(1);
  std::unique_ptr<DecoderModel> model = NewModel(0, 1);
  auto flat = FlatParameters::Create(model.get());
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_FALSE(NcclCommunicator::DeviceUuid(0).empty());
  auto id = NcclCommunicator::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  auto comm = NcclCommunicator::Join(*id, 0, 1, 0, absl::Seconds(60));
  ASSERT_TRUE(comm.ok()) << comm.status();
  const at::Tensor before = Logits(*model);
  ASSERT_TRUE((*comm)->Broadcast(**flat, 0, 1 << 10, absl::Seconds(60)).ok());
  EXPECT_TRUE(at::equal(Logits(*model), before));
}

TEST(NcclCommunicatorTest, AMemberThatNeverJoinsCostsTheDeadlineNotAHang) {
  KF_REQUIRE_GPUS(1);
  auto id = NcclCommunicator::NewUniqueId();
  ASSERT_TRUE(id.ok());
  const absl::Time started = absl::Now();
  auto comm = NcclCommunicator::Join(*id, 0, 2, 0, absl::Seconds(3));
  const absl::Duration took = absl::Now() - started;
  ASSERT_FALSE(comm.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(comm.status())) << comm.status();
  EXPECT_THAT(comm.status().message(), HasSubstr("never joined"));
  EXPECT_LT(took, absl::Seconds(30));
}

TEST(NcclCommunicatorTest, BadGroupsAreRefusedByName) {
  KF_REQUIRE_GPUS(1);
  EXPECT_THAT(NcclCommunicator::Join("short", 0, 2, 0, absl::Seconds(1)).status().message(),
              HasSubstr("not 128"));
  auto id = NcclCommunicator::NewUniqueId();
  EXPECT_THAT(NcclCommunicator::Join(*id, 2, 2, 0, absl::Seconds(1)).status().message(),
              HasSubstr("rank 2"));
}

// Ranks 0 and 1 join from their own threads; returns both or fails.
std::pair<std::unique_ptr<NcclCommunicator>, std::unique_ptr<NcclCommunicator>> JoinPair() {
  auto id = NcclCommunicator::NewUniqueId();
  EXPECT_TRUE(id.ok()) << id.status();
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> second = absl::UnknownError("not joined");
  std::thread peer([&] { second = NcclCommunicator::Join(*id, 1, 2, 1, absl::Seconds(60)); });
  auto first = NcclCommunicator::Join(*id, 0, 2, 0, absl::Seconds(60));
  peer.join();
  EXPECT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(second.ok()) << second.status();
  if (!first.ok() || !second.ok()) return {};
  return {*std::move(first), *std::move(second)};
}

class TwoGpuBroadcastTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(TwoGpuBroadcastTest, TheReceiverHoldsTheSendersParametersAfterwards) {
  KF_REQUIRE_GPUS(2);
  std::unique_ptr<DecoderModel> learner = NewModel(0, 1), worker = NewModel(1, 2);
  auto sent = FlatParameters::Create(learner.get());
  auto received = FlatParameters::Create(worker.get());
  ASSERT_TRUE(sent.ok() && received.ok());
  ASSERT_EQ((*sent)->Layout(), (*received)->Layout());
  ASSERT_FALSE(at::equal(Logits(*learner), Logits(*worker)));
  ASSERT_NE(NcclCommunicator::DeviceUuid(0), NcclCommunicator::DeviceUuid(1));
  auto [rank0, rank1] = JoinPair();
  ASSERT_TRUE(rank0 && rank1);
  absl::Status on_worker;
  std::thread peer([&] { on_worker = rank1->Broadcast(**received, 0, GetParam(), absl::Seconds(60)); });
  const absl::Status on_learner = rank0->Broadcast(**sent, 0, GetParam(), absl::Seconds(60));
  peer.join();
  ASSERT_TRUE(on_learner.ok()) << on_learner;
  ASSERT_TRUE(on_worker.ok()) << on_worker;
  for (auto [name, tensor] : learner->NamedParameters()) {
    for (auto [other_name, other] : worker->NamedParameters()) {
      if (other_name == name) EXPECT_TRUE(at::equal(tensor.cpu(), other.cpu())) << name;
    }
  }
  EXPECT_TRUE(at::equal(Logits(*learner), Logits(*worker)));
}

INSTANTIATE_TEST_SUITE_P(Buckets, TwoGpuBroadcastTest, ::testing::Values(1000, 256 << 20));

TEST(TwoGpuFaultTest, ARankThatNeverReceivesFailsTheBroadcastInTimeAndANewGroupWorks) {
  KF_REQUIRE_GPUS(2);
  std::unique_ptr<DecoderModel> learner = NewModel(0, 1), worker = NewModel(1, 2);
  auto sent = FlatParameters::Create(learner.get());
  auto received = FlatParameters::Create(worker.get());
  ASSERT_TRUE(sent.ok() && received.ok());
  {
    auto [rank0, rank1] = JoinPair();
    ASSERT_TRUE(rank0 && rank1);
    // First a broadcast both take part in (NCCL connects lazily, at the
    // first collective), of more bytes than NCCL buffers between two ranks
    // (a few MiB): rank 0 cannot complete it alone.
    constexpr int64_t kBytes = 256 << 20;
    at::Tensor on0 = at::zeros({kBytes}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, 0));
    at::Tensor on1 = at::ones({kBytes}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, 1));
    absl::Status peer_status;
    std::thread peer([&] {
      peer_status = rank1->BroadcastBytes(on1.data_ptr(), kBytes, 0, 1 << 22, absl::Seconds(60));
    });
    ASSERT_TRUE(rank0->BroadcastBytes(on0.data_ptr(), kBytes, 0, 1 << 22, absl::Seconds(60)).ok());
    peer.join();
    ASSERT_TRUE(peer_status.ok()) << peer_status;
    EXPECT_EQ(on1.sum().item<int64_t>(), 0);
    // Then rank 1 is alive but never posts its receive (a worker stuck or
    // gone).
    const absl::Time started = absl::Now();
    const absl::Status status = rank0->BroadcastBytes(on0.data_ptr(), kBytes, 0, 1 << 22,
                                                      absl::Seconds(3));
    EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
    EXPECT_LT(absl::Now() - started, absl::Seconds(30));
    EXPECT_TRUE(rank0->broken());
    EXPECT_TRUE(absl::IsFailedPrecondition(rank0->Broadcast(**sent, 0, 1 << 20, absl::Seconds(3))));
  }
  auto [rank0, rank1] = JoinPair();
  ASSERT_TRUE(rank0 && rank1);
  absl::Status on_worker;
  std::thread peer([&] { on_worker = rank1->Broadcast(**received, 0, 1 << 20, absl::Seconds(60)); });
  EXPECT_TRUE(rank0->Broadcast(**sent, 0, 1 << 20, absl::Seconds(60)).ok());
  peer.join();
  EXPECT_TRUE(on_worker.ok()) << on_worker;
  EXPECT_TRUE(at::equal(Logits(*learner), Logits(*worker)));
}

}  // namespace
}  // namespace kforge
