// Spare sandboxes (FunnelConfig.spare_sandboxes; the shared test funnel
// keeps one): candidates are served from them, each spare serves one
// candidate, a spare that died while idle is replaced instead of failing the
// next candidate, a request with other limits gets a sandbox made with its
// own limits, and a spare outlives the zygote that forked it.
#include <signal.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/support/funnel_fixture.h"

namespace kforge {
namespace {

class SpareSandboxesTest : public testing::FunnelTest {
 protected:
  // Waits (up to a minute) until the funnel has a spare ready; its pid.
  static int WaitForSpare() {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      const std::vector<int> pids = funnel_->spare_sandbox_pids();
      if (!pids.empty()) return pids.front();
      absl::SleepFor(absl::Milliseconds(20));
    }
    return -1;
  }
  static v1::Verdict VerifyRelu(const std::function<void(v1::VerifierOptions&)>& tweak = {}) {
    return Verify(BuiltinTask("level1/1_ReLU.py"), BuiltinTask("solutions-torch/level1/1_ReLU.py"),
                  tweak);
  }
};

TEST_F(SpareSandboxesTest, CandidatesRunInSparesEachInItsOwn) {
  std::vector<int> used;
  for (int i = 0; i < 3; ++i) {
    const int spare = WaitForSpare();
    ASSERT_GT(spare, 0) << "no spare sandbox became ready within a minute";
    const SandboxPool::Stats before = funnel_->sandbox_stats();
    const v1::Verdict verdict = VerifyRelu();
    EXPECT_TRUE(verdict.correct()) << Describe(verdict);
    EXPECT_EQ(funnel_->sandbox_stats().from_spares, before.from_spares + 1);
    used.push_back(spare);
  }
  // A spare is never handed to a second candidate: three candidates, three
  // processes.
  EXPECT_NE(used[0], used[1]);
  EXPECT_NE(used[1], used[2]);
  EXPECT_NE(used[0], used[2]);
}

TEST_F(SpareSandboxesTest, DeadSpareIsReplacedNotBlamedOnTheCandidate) {
  const int spare = WaitForSpare();
  ASSERT_GT(spare, 0) << "no spare sandbox became ready within a minute";
  ASSERT_EQ(::kill(spare, SIGKILL), 0);
  const SandboxPool::Stats before = funnel_->sandbox_stats();
  const v1::Verdict verdict = VerifyRelu();
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  const SandboxPool::Stats after = funnel_->sandbox_stats();
  EXPECT_EQ(after.spares_discarded, before.spares_discarded + 1);
  // Served by a sandbox made for it (the filler may not have a new spare
  // yet) or by a newer spare, never by the dead one.
  EXPECT_EQ(after.from_spares + after.made_on_demand,
            before.from_spares + before.made_on_demand + 1);
}

TEST_F(SpareSandboxesTest, OtherLimitsGetTheirOwnSandbox) {
  ASSERT_GT(WaitForSpare(), 0) << "no spare sandbox became ready within a minute";
  const SandboxPool::Stats before = funnel_->sandbox_stats();
  const v1::Verdict verdict = VerifyRelu([](v1::VerifierOptions& options) {
    options.mutable_limits()->set_max_open_files(300);
  });
  EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  const SandboxPool::Stats after = funnel_->sandbox_stats();
  EXPECT_EQ(after.made_on_demand, before.made_on_demand + 1);
  EXPECT_GE(after.spares_discarded, before.spares_discarded + 1);
  // The filler follows the new limits: the next candidate with them finds
  // a spare again.
  ASSERT_GT(WaitForSpare(), 0);
  const v1::Verdict again = VerifyRelu([](v1::VerifierOptions& options) {
    options.mutable_limits()->set_max_open_files(300);
  });
  EXPECT_TRUE(again.correct()) << Describe(again);
  EXPECT_EQ(funnel_->sandbox_stats().from_spares, after.from_spares + 1);
}

// The parent of a process, from /proc/PID/stat ("pid (comm) state ppid ...").
int ParentOf(int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));
  char state = 0;
  int ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

TEST_F(SpareSandboxesTest, ASpareOutlivesItsZygoteAndTheFunnelKeepsServing) {
  const int spare = WaitForSpare();
  ASSERT_GT(spare, 0) << "no spare sandbox became ready within a minute";
  const int zygote = ParentOf(spare);
  ASSERT_GT(zygote, 1);
  ASSERT_EQ(::kill(zygote, SIGKILL), 0);
  // The funnel starts a new zygote for the next candidate; the spare forked
  // by the dead one still serves (it holds its zygote client alive), and
  // candidates after it run under the new zygote.
  for (int i = 0; i < 3; ++i) {
    const v1::Verdict verdict = VerifyRelu();
    EXPECT_TRUE(verdict.correct()) << Describe(verdict);
  }
  EXPECT_TRUE(funnel_->healthy());
}

}  // namespace
}  // namespace kforge
