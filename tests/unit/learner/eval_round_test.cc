// The held-out round in flight: a group counts only in the round that
// offered it, the round is complete when every group is back, and its
// summary names the policy versions that answered.
#include "learner/rollout/eval_round.h"

#include <gtest/gtest.h>

namespace kforge {
namespace {

CompletedGroup Back(const std::string& id, std::vector<int64_t> versions) {
  CompletedGroup group;
  group.item.set_group_id(id);
  group.item.set_eval(true);
  for (int64_t v : versions) group.samples.emplace_back().mutable_sample()->set_policy_version(v);
  return group;
}

TEST(EvalRoundTest, CompletesWhenEveryOfferedGroupIsBackAndNamesTheVersionsThatAnswered) {
  EvalRound round;
  EXPECT_FALSE(round.open());
  round.Open(40, 2);
  EXPECT_EQ(EvalRound::GroupId(40, 1, "ab12"), "e000040-1-ab12");
  EXPECT_TRUE(round.Take(Back(EvalRound::GroupId(40, 0, "ab12"), {41})));
  EXPECT_FALSE(round.complete());
  // A re-issued group keeps its round's prefix.
  EXPECT_TRUE(round.Take(Back(EvalRound::GroupId(40, 1, "ab12") + "~r1", {44, 43})));
  EXPECT_TRUE(round.complete());
  const EvalRound::Summary summary = round.Close();
  EXPECT_EQ(summary.step, 40);
  EXPECT_EQ(summary.offered, 2u);
  EXPECT_EQ(summary.groups.size(), 2u);
  EXPECT_EQ(summary.min_policy_version, 41);
  EXPECT_EQ(summary.max_policy_version, 44);
  EXPECT_FALSE(round.open());
}

TEST(EvalRoundTest, AGroupOfARoundAlreadySummarisedIsNotCountedAnywhere) {
  EvalRound round;
  // Nothing open: a late group starts no round of its own.
  EXPECT_FALSE(round.Take(Back(EvalRound::GroupId(5, 0, "n"), {6})));
  EXPECT_FALSE(round.open());
  round.Open(10, 1);
  EXPECT_FALSE(round.Take(Back(EvalRound::GroupId(5, 0, "n") + "~r1", {11})));
  EXPECT_FALSE(round.Take(Back("g000003-n", {11})));  // not an evaluation id at all
  EXPECT_FALSE(round.complete());
  const EvalRound::Summary summary = round.Close();
  EXPECT_TRUE(summary.groups.empty());
  EXPECT_EQ(summary.min_policy_version, 0);
  EXPECT_EQ(summary.max_policy_version, 0);
}

}  // namespace
}  // namespace kforge
