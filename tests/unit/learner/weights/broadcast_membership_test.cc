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
  BroadcastMembership membership_{absl::Seconds(10), /*backoff=*/absl::Seconds(30),
                                  /*max_backoff=*/absl::Seconds(100)};
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

TEST_F(BroadcastMembershipTest, AWorkerWithoutAGpuIdentityIsNeverEligible) {
  Poll("w1", "", 0);
  EXPECT_THAT(Eligible(1), IsEmpty());
}

TEST_F(BroadcastMembershipTest, FailuresBackAWorkerOffLongerEachTimeUntilAGroupForms) {
  Poll("w1", "gpu-1", 0);
  membership_.Failed("w1", At(0));  // out for 30 s
  Poll("w1", "gpu-1", 1);
  EXPECT_THAT(Eligible(29), IsEmpty()) << "polling again does not end the back-off";
  Poll("w1", "gpu-1", 31);
  EXPECT_THAT(Eligible(31), ElementsAre("w1"));
  membership_.Failed("w1", At(31));  // out for 60 s
  Poll("w1", "gpu-1", 80);
  EXPECT_THAT(Eligible(80), IsEmpty());
  EXPECT_THAT(Eligible(92), IsEmpty()) << "no poll for 12 s";
  Poll("w1", "gpu-1", 91);
  EXPECT_THAT(Eligible(92), ElementsAre("w1"));
  membership_.Failed("w1", At(92));  // 120 s capped at 100
  Poll("w1", "gpu-1", 191);
  EXPECT_THAT(Eligible(191), IsEmpty());
  Poll("w1", "gpu-1", 193);
  EXPECT_THAT(Eligible(193), ElementsAre("w1"));
  membership_.Formed({"w1"});
  membership_.Failed("w1", At(193));  // back to 30 s
  Poll("w1", "gpu-1", 224);
  EXPECT_THAT(Eligible(224), ElementsAre("w1"));
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
