// How many groups the job driver offers: this step's while its batch is
// short, later steps' within lookahead_steps, max_staleness and the steps
// left, the next step's once the batch is complete; and, over a whole job
// whose groups come back in order, every group trained within the staleness
// bound and none offered beyond the job's need.
#include "learner/rollout/offer_window.h"

#include <algorithm>
#include <deque>
#include <vector>

#include <gtest/gtest.h>

namespace kforge {
namespace {

OfferWindow Window(int32_t lookahead, int32_t staleness, int64_t steps_after, int64_t need = 4) {
  return {.prompts_per_step = need,
          .max_staleness = staleness,
          .lookahead_steps = lookahead,
          .steps_after = steps_after};
}

TEST(StepsAheadTest, IsTheLookaheadWithinTheStalenessBoundAndTheStepsLeft) {
  EXPECT_EQ(StepsAhead(Window(0, 1, 10)), 0);
  EXPECT_EQ(StepsAhead(Window(1, 1, 10)), 1);
  EXPECT_EQ(StepsAhead(Window(3, 1, 10)), 1);  // max_staleness
  EXPECT_EQ(StepsAhead(Window(3, 5, 10)), 3);
  EXPECT_EQ(StepsAhead(Window(3, 5, 2)), 2);  // the steps left
  EXPECT_EQ(StepsAhead(Window(2, 2, 0)), 0);  // the last step
  EXPECT_EQ(StepsAhead(Window(2, 0, 10)), 0);  // synchronous
  EXPECT_EQ(StepsAhead(Window(2, 2, -1)), 0);  // never below 0
}

TEST(GroupsToOfferWhileCollectingTest, WithoutLookaheadFillsOnlyThisStepsBatch) {
  const OfferWindow window = Window(0, 1, 10);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {}), 4);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 3}), 1);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 2, .batch = 1}), 1);
  // The next step's groups, offered once the last batch was complete.
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 4}), 0);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 1, .batch = 3}), 0);
}

TEST(GroupsToOfferWhileCollectingTest, WithLookaheadKeepsLaterStepsGroupsOut) {
  const OfferWindow window = Window(1, 1, 10);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {}), 8);
  // Four of the next step's were offered while the last step trained.
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 4}), 4);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 5, .batch = 3}), 0);
  // A group dropped or too stale: replaced.
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 4, .batch = 3}), 1);
  EXPECT_EQ(GroupsToOfferWhileCollecting(Window(3, 3, 10), {.untaken = 6, .batch = 2}), 8);
}

TEST(GroupsToOfferWhileCollectingTest, CountsCarriedGroupsAndNeverGoesNegative) {
  const OfferWindow window = Window(1, 1, 10);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 2, .batch = 3, .carried = 2}), 1);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 20}), 0);
}

TEST(GroupsToOfferWhileCollectingTest, NearTheJobsEndOffersOnlyForTheStepsLeft) {
  EXPECT_EQ(GroupsToOfferWhileCollecting(Window(3, 3, 1), {}), 8);
  EXPECT_EQ(GroupsToOfferWhileCollecting(Window(3, 3, 0), {}), 4);
  EXPECT_EQ(GroupsToOfferWhileCollecting(Window(3, 3, 0), {.untaken = 2, .batch = 2}), 0);
}

TEST(SpareGroupsTest, EachStepIsOfferedItsSparesOverItsBatch) {
  OfferWindow window = Window(0, 1, 10);
  window.spare_groups = 2;
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {}), 6);
  // The batch is full at 4; two more out are this step's spares.
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 2, .batch = 3}), 1);
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {.batch = 4}), 6);
  // Spares carried from this step count towards the next one's.
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {.untaken = 1, .batch = 4, .carried = 2}), 3);
  window.lookahead_steps = 1;
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {}), 12);
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {.untaken = 6, .batch = 4}), 0);
  window.spare_groups = -3;  // never fewer than the batch
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {}), 8);
  window.spare_groups = 9;  // at most a batch of spares
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {}), 16);
}

TEST(SpareGroupsTest, TheLastStepGetsNoneSoNoneIsLeftOver) {
  OfferWindow window = Window(1, 1, 0);
  window.spare_groups = 2;
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {}), 4);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.carried = 2}), 2);
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {}), 0);
  // One step left after this one: its groups, offered now, have no spares.
  // One step left after this one: its groups, offered now, have no spares,
  // and this step's are trimmed to what the two steps can train.
  window.steps_after = 1;
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {}), 8);
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {.batch = 4}), 4);
}

TEST(OfferCapTest, GroupsOutNeverExceedWhatTheRestOfTheJobCanTrain) {
  // Two steps left after this one, two later steps' groups out: the window
  // would add this step's batch, the cap (4 x 3 = 12) lets 2 more out.
  OfferWindow window = Window(2, 2, 2);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 4}), 8);
  // Older groups (not supply for these steps, but they may still train)
  // count against the cap.
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 4, .older = 6}), 2);
  EXPECT_EQ(GroupsToOfferWhileCollecting(window, {.untaken = 4, .older = 9}), 0);
  // After the batch: 8 can still train, 3 older ones are out.
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {.batch = 4, .older = 3}), 5);
  window.spare_groups = 4;
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {.batch = 4}), 8);
}

TEST(GroupsToOfferAfterBatchTest, WithoutLookaheadOffersTheNextStepsGroups) {
  const OfferWindow window = Window(0, 1, 3);
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {}), 4);
  // This step's batch trains now: it is not counted.
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {.batch = 4}), 4);
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {.untaken = 1, .batch = 4, .carried = 2}), 1);
  EXPECT_EQ(GroupsToOfferAfterBatch(window, {.untaken = 5}), 0);
}

TEST(GroupsToOfferAfterBatchTest, OffersNothingWhenSynchronousOrAtTheLastStep) {
  EXPECT_EQ(GroupsToOfferAfterBatch(Window(0, 0, 3), {}), 0);
  EXPECT_EQ(GroupsToOfferAfterBatch(Window(2, 0, 3), {}), 0);
  EXPECT_EQ(GroupsToOfferAfterBatch(Window(0, 1, 0), {}), 0);
  EXPECT_EQ(GroupsToOfferAfterBatch(Window(2, 2, 0), {}), 0);
}

TEST(GroupsToOfferAfterBatchTest, WithLookaheadOnlyTopsUpWhatCollectingLeftOut) {
  // Collecting already brought later steps' groups out.
  EXPECT_EQ(GroupsToOfferAfterBatch(Window(1, 1, 3), {.untaken = 3, .batch = 4, .carried = 1}), 0);
  EXPECT_EQ(GroupsToOfferAfterBatch(Window(2, 2, 3), {.untaken = 8}), 0);
  // One of them dropped.
  EXPECT_EQ(GroupsToOfferAfterBatch(Window(1, 1, 3), {.untaken = 2, .carried = 1}), 1);
  EXPECT_EQ(GroupsToOfferAfterBatch(Window(2, 2, 3), {.untaken = 5}), 3);
}

// A job driven by the window against groups that come back in the order
// they were offered, `burst` at a time: each step collects prompts_per_step
// groups (the carried ones first), trains under version step - 1, and every
// step updates the policy.
struct Simulated {
  int64_t offered = 0;
  int64_t most_out = 0;  // most groups out at once, the batch training included
  int64_t out_before_first_batch = 0;
  int64_t worst_lag = 0;  // trained version - offered version
};

Simulated Simulate(int32_t lookahead, int32_t staleness, int64_t need, int64_t total_steps,
                   int64_t burst) {
  Simulated sim;
  std::deque<int64_t> untaken;  // the offering version of each group, in order
  std::deque<int64_t> carried;
  for (int64_t step = 1; step <= total_steps; ++step) {
    const int64_t version = step - 1;
    const OfferWindow window = {.prompts_per_step = need,
                                .max_staleness = staleness,
                                .lookahead_steps = lookahead,
                                .steps_after = total_steps - step};
    std::vector<int64_t> batch;
    auto fill = [&] {
      while (!carried.empty() && static_cast<int64_t>(batch.size()) < need) {
        batch.push_back(carried.front());
        carried.pop_front();
      }
    };
    auto out = [&] {
      return GroupsOut{.untaken = static_cast<int64_t>(untaken.size()),
                       .batch = static_cast<int64_t>(batch.size()),
                       .carried = static_cast<int64_t>(carried.size())};
    };
    auto offer = [&](int64_t count) {
      for (int64_t i = 0; i < count; ++i) untaken.push_back(version);
      sim.offered += count;
      const GroupsOut now = out();
      sim.most_out = std::max(sim.most_out, now.untaken + now.batch + now.carried);
    };
    fill();
    while (static_cast<int64_t>(batch.size()) < need) {
      offer(GroupsToOfferWhileCollecting(window, out()));
      if (step == 1 && sim.out_before_first_batch == 0) {
        sim.out_before_first_batch = static_cast<int64_t>(untaken.size());
      }
      for (int64_t i = 0; i < burst && !untaken.empty(); ++i) {
        carried.push_back(untaken.front());
        untaken.pop_front();
      }
      fill();
    }
    offer(GroupsToOfferAfterBatch(window, out()));
    for (int64_t offered_at : batch) sim.worst_lag = std::max(sim.worst_lag, version - offered_at);
  }
  EXPECT_TRUE(untaken.empty() && carried.empty()) << "groups left over at the job's end";
  return sim;
}

TEST(OfferWindowJobTest, GroupsInOrderAreTrainedWithinTheStalenessBoundAndNoneIsOfferedInVain) {
  for (int32_t staleness : {0, 1, 2, 3}) {
    for (int32_t lookahead : {0, 1, 2, 4}) {
      for (int64_t burst : {1, 3, 16}) {
        const int64_t need = 4, steps = 7;
        const Simulated sim = Simulate(lookahead, staleness, need, steps, burst);
        const int64_t ahead = std::min(lookahead, staleness);
        SCOPED_TRACE(testing::Message() << "max_staleness " << staleness << ", lookahead "
                                        << lookahead << ", burst " << burst);
        // Steps whose groups are out beside the one training: with a
        // staleness bound at least the next one (offered once the batch is
        // complete, or, with lookahead, while it is collected).
        const int64_t pipelined = std::max<int64_t>(ahead, staleness > 0 ? 1 : 0);
        EXPECT_EQ(sim.offered, need * steps);
        EXPECT_EQ(sim.out_before_first_batch, need * (1 + ahead));
        EXPECT_EQ(sim.most_out, need * (1 + pipelined));
        EXPECT_LE(sim.worst_lag, staleness);
        EXPECT_EQ(sim.worst_lag, pipelined);
      }
    }
  }
}

}  // namespace
}  // namespace kforge
