// Who is in the weight-broadcast group: alive by poll, of the learner's
// layout, one per GPU and never on the learner's, and after a failure only
// those that came back.
#include "learner/weights/broadcast_membership.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kLayout[] = "bf16:1024";
constexpr char kLearnerGpu[] = "gpu-0";

class BroadcastMembershipTest : public ::testing::Test {
 protected:
  absl::Time At(int seconds) const { return start_ + absl::Seconds(seconds); }
  std::vector<std::string> Eligible(int seconds) const {
    return membership_.Eligible(kLayout, kLearnerGpu, At(seconds));
  }
  void Poll(const std::string& worker, const std::string& gpu, int seconds) {
    membership_.PollStarted(worker, kLayout, gpu, At(seconds));
    membership_.PollEnded(worker, At(seconds));
  }

  const absl::Time start_ = absl::FromUnixSeconds(1'000'000);
  BroadcastMembership membership_{absl::Seconds(10)};
};

TEST_F(BroadcastMembershipTest, WorkersThatPolledRecentlyAreEligibleInIdOrder) {
  Poll("w2", "gpu-2", 0);
  Poll("w1", "gpu-1", 0);
  EXPECT_THAT(Eligible(5), ElementsAre("w1", "w2"));
}

TEST_F(BroadcastMembershipTest, SilenceBeyondTheTimeoutLeavesAWorkerOutButAnOpenPollKeepsItIn) {
  Poll("w1", "gpu-1", 0);
  membership_.PollStarted("w2", kLayout, "gpu-2", At(0));  // still open
  EXPECT_THAT(Eligible(11), ElementsAre("w2"));
  membership_.PollEnded("w2", At(30));
  EXPECT_THAT(Eligible(31), ElementsAre("w2"));
  EXPECT_THAT(Eligible(41), IsEmpty());
}

TEST_F(BroadcastMembershipTest, AnotherLayoutIsNeverEligible) {
  membership_.PollStarted("w1", "fp32:2048", "gpu-1", At(0));
  EXPECT_THAT(Eligible(1), IsEmpty());
}

TEST_F(BroadcastMembershipTest, OneRankPerGpuAndNoneOnTheLearners) {
  Poll("w1", kLearnerGpu, 0);
  Poll("w2", "gpu-1", 0);
  Poll("w3", "gpu-1", 0);
  EXPECT_THAT(Eligible(1), ElementsAre("w2"));
}

TEST_F(BroadcastMembershipTest, SuspectsStayOutUntilTheyPollAgain) {
  Poll("w1", "gpu-1", 0);
  Poll("w2", "gpu-2", 0);
  membership_.Suspect({"w1", "w2"}, At(2));
  EXPECT_THAT(Eligible(3), IsEmpty()) << "a failed group's members are not waited for again at once";
  Poll("w2", "gpu-2", 4);  // alive: it came back after its own timeout
  EXPECT_THAT(Eligible(5), ElementsAre("w2"));
}

TEST_F(BroadcastMembershipTest, RemovedWorkersAreForgottenUntilTheyPoll) {
  Poll("w1", "gpu-1", 0);
  membership_.PollStarted("w2", kLayout, "gpu-2", At(0));
  membership_.Remove("w2");
  membership_.PollEnded("w2", At(1));  // a poll that ends after its worker went
  EXPECT_THAT(Eligible(2), ElementsAre("w1"));
  Poll("w2", "gpu-2", 3);
  EXPECT_THAT(Eligible(4), ElementsAre("w1", "w2"));
}

}  // namespace
}  // namespace kforge
