// AffinityChoice: a task keeps its verifier whatever the order the verifiers
// are listed in, tasks spread over verifiers, and a task's verifier past the
// slack hands the overflow to the task's next choice, not to any verifier.
#include "rollout_worker/dispatch/task_affinity.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

TEST(TaskAffinityTest, ATaskPrefersTheSameVerifierInAnyOrder) {
  const std::vector<std::string> forward = {"10.0.0.1:50052", "10.0.0.2:50052", "10.0.0.3:50052"};
  const std::vector<std::string> backward(forward.rbegin(), forward.rend());
  const std::vector<int> idle = {0, 0, 0};
  for (int t = 0; t < 50; ++t) {
    const std::string task = absl::StrCat("level1/", t, "_Task");
    const std::optional<size_t> a = AffinityChoice(task, forward, idle, 4);
    const std::optional<size_t> b = AffinityChoice(task, backward, idle, 4);
    ASSERT_TRUE(a.has_value() && b.has_value());
    EXPECT_EQ(forward[*a], backward[*b]) << task;
  }
}

TEST(TaskAffinityTest, TasksSpreadOverTheVerifiers) {
  const std::vector<std::string> devices = {"cuda:0", "cuda:1"};
  const std::vector<int> idle = {0, 0};
  std::map<size_t, int> wins;
  for (int t = 0; t < 200; ++t) {
    ++wins[*AffinityChoice(absl::StrCat("task-", t), devices, idle, 4)];
  }
  // Each side of a fair split of 200 lies in [70, 130] with overwhelming
  // probability; a hash that ignored the task would give 200 and 0.
  EXPECT_GE(wins[0], 70);
  EXPECT_GE(wins[1], 70);
}

TEST(TaskAffinityTest, PastTheSlackTheOverflowGoesToTheNextChoice) {
  const std::vector<std::string> devices = {"cuda:0", "cuda:1", "cuda:2", "cuda:3"};
  const std::string task = "level1/23_Softmax";
  const std::vector<size_t> ranking = AffinityRanking(task, devices);
  ASSERT_EQ(ranking.size(), devices.size());
  std::vector<int> in_flight = {0, 0, 0, 0};
  EXPECT_EQ(AffinityChoice(task, devices, in_flight, 4), ranking[0]);
  in_flight[ranking[0]] = 4;
  EXPECT_EQ(AffinityChoice(task, devices, in_flight, 4), ranking[0]) << "at the slack: still home";
  in_flight[ranking[0]] = 5;
  EXPECT_EQ(AffinityChoice(task, devices, in_flight, 4), ranking[1]) << "past it: the second choice";
  in_flight[ranking[1]] = 5;
  EXPECT_EQ(AffinityChoice(task, devices, in_flight, 4), ranking[2]) << "both past: the third";
  in_flight[ranking[2]] = 1;
  in_flight[ranking[3]] = 1;
  EXPECT_EQ(AffinityChoice(task, devices, in_flight, 4), ranking[0])
      << "measured from the least busy: 5 is within 1 + 4";
}

TEST(TaskAffinityTest, TheLeastBusyAlwaysQualifiesButAvoidIsNeverChosen) {
  const std::vector<std::string> devices = {"cuda:0", "cuda:1", "cuda:2"};
  const std::string task = "level1/23_Softmax";
  const std::vector<size_t> ranking = AffinityRanking(task, devices);
  std::vector<int> in_flight = {9, 9, 9};
  in_flight[ranking[2]] = 0;
  EXPECT_EQ(AffinityChoice(task, devices, in_flight, 0), ranking[2]);
  EXPECT_EQ(AffinityChoice(task, devices, std::vector<int>{0, 0, 0}, 0, ranking[0]), ranking[1]);
  EXPECT_EQ(AffinityChoice(task, std::vector<std::string>{"a"}, std::vector<int>{0}, 0, 0),
            std::nullopt)
      << "the only verifier is the one to avoid";
}

TEST(TaskAffinityTest, TheRankingIsTheSameInAnyOrderAndStartsWithTheIdleChoice) {
  const std::vector<std::string> forward = {"10.0.0.1:50052", "10.0.0.2:50052", "10.0.0.3:50052",
                                            "10.0.0.4:50052"};
  const std::vector<std::string> backward(forward.rbegin(), forward.rend());
  const std::vector<int> idle = {0, 0, 0, 0};
  for (int t = 0; t < 50; ++t) {
    const std::string task = absl::StrCat("level1/", t, "_Task");
    const std::vector<size_t> a = AffinityRanking(task, forward);
    const std::vector<size_t> b = AffinityRanking(task, backward);
    ASSERT_EQ(a.size(), forward.size());
    for (size_t r = 0; r < a.size(); ++r) EXPECT_EQ(forward[a[r]], backward[b[r]]) << task << r;
    EXPECT_EQ(AffinityChoice(task, forward, idle, 0), a[0]) << task;
  }
}

TEST(TaskAffinityTest, NoVerifiersOrMismatchedCountsChooseNone) {
  EXPECT_EQ(AffinityChoice("t", std::vector<std::string>{}, std::vector<int>{}, 4), std::nullopt);
  EXPECT_EQ(AffinityChoice("t", std::vector<std::string>{"a", "b"}, std::vector<int>{0}, 4),
            std::nullopt);
}

}  // namespace
}  // namespace kforge
