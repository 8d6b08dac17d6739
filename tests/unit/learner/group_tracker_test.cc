// The learner's books for groups and scored samples: each sample is
// acknowledged once with the right status, groups complete, time out, are
// re-issued under fresh ids or dropped, and the buffer stays bounded;
// workers waiting for work share the groups offered together.
#include "learner/rollout/group_tracker.h"

#include <algorithm>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

using ::testing::HasSubstr;

v1::WorkItem Item(const std::string& group, int size) {
  v1::WorkItem item;
  item.set_job_id("job-1");
  item.set_group_id(group);
  item.set_group_size(size);
  return item;
}

v1::ScoredSample Scored(const std::string& group, int index, int64_t version = 0) {
  v1::ScoredSample scored;
  v1::SampleKey* key = scored.mutable_sample()->mutable_key();
  key->set_job_id("job-1");
  key->set_group_id(group);
  key->set_index_in_group(index);
  key->set_sample_id(absl::StrCat("job-1/", group, "/", index));
  scored.mutable_sample()->set_policy_version(version);
  scored.mutable_sample()->add_completion_tokens(7);
  scored.mutable_sample()->add_completion_logprobs(-0.5f);
  scored.mutable_verdict()->set_correct(index % 2 == 0);
  return scored;
}

v1::SampleAck::Status Status(GroupTracker& tracker, const v1::ScoredSample& scored) {
  absl::StatusOr<v1::SampleAck> ack = tracker.Deliver(scored);
  EXPECT_TRUE(ack.ok()) << ack.status();
  return ack.ok() ? ack->status() : v1::SampleAck::STATUS_UNSPECIFIED;
}

TEST(GroupTrackerTest, WorkersWaitingWhenAStepsGroupsAreOfferedShareThem) {
  GroupTracker tracker({});
  constexpr int kWorkers = 3;
  std::vector<size_t> taken(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      // Room for a whole step, as the GPU overlay's workers have.
      taken[static_cast<size_t>(w)] =
          tracker.Take(absl::StrCat("w", w), /*max_groups=*/16, absl::Seconds(30)).size();
    });
  }
  for (int i = 0; i < 2000 && tracker.stats().takers < kWorkers; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(tracker.stats().takers, kWorkers);
  std::vector<v1::WorkItem> step;
  for (int g = 0; g < 16; ++g) step.push_back(Item(absl::StrCat("g", g), 8));
  ASSERT_TRUE(tracker.Offer(std::move(step)).ok());
  for (std::thread& t : workers) t.join();
  std::sort(taken.begin(), taken.end());
  EXPECT_EQ(taken, (std::vector<size_t>{5, 5, 6})) << "not one worker taking all 16";
  EXPECT_EQ(tracker.stats().takers, 0);
  // Alone in Take, a worker takes all it has room for.
  std::vector<v1::WorkItem> next;
  for (int g = 16; g < 26; ++g) next.push_back(Item(absl::StrCat("g", g), 8));
  ASSERT_TRUE(tracker.Offer(std::move(next)).ok());
  EXPECT_EQ(tracker.Take("w0", 16, absl::ZeroDuration()).size(), 10u);
}

TEST(GroupTrackerTest, GroupsOfferedTogetherGoInAllOrNone) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(Item("used", 2)).ok());
  std::vector<v1::WorkItem> clash = {Item("a", 2), Item("used", 2)};
  EXPECT_THAT(std::string(tracker.Offer(std::move(clash)).message()), HasSubstr("already used"));
  std::vector<v1::WorkItem> twice = {Item("b", 2), Item("b", 2)};
  EXPECT_THAT(std::string(tracker.Offer(std::move(twice)).message()), HasSubstr("offered twice"));
  std::vector<v1::WorkItem> empty_group = {Item("c", 2), Item("d", 0)};
  EXPECT_EQ(tracker.Offer(std::move(empty_group)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tracker.stats().groups_pending, 1) << "none of a refused offer is queued";
  // And a refused offer spends no id.
  std::vector<v1::WorkItem> retry = {Item("a", 2), Item("b", 2), Item("c", 2)};
  EXPECT_TRUE(tracker.Offer(std::move(retry)).ok());
  EXPECT_EQ(tracker.stats().groups_pending, 4);
}

TEST(GroupTrackerTest, AGroupCompletesWhenEverySampleIsAccepted) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(Item("g", 2)).ok());
  ASSERT_EQ(tracker.Take("w1", 4, absl::ZeroDuration()).size(), 1u);
  EXPECT_EQ(Status(tracker, Scored("g", 1)), v1::SampleAck::ACCEPTED);
  EXPECT_TRUE(tracker.TakeCompleted().empty());
  EXPECT_EQ(Status(tracker, Scored("g", 0)), v1::SampleAck::ACCEPTED);
  std::vector<CompletedGroup> done = tracker.TakeCompleted();
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(done[0].samples.size(), 2u);
  EXPECT_EQ(done[0].samples[0].sample().key().index_in_group(), 0);
  EXPECT_EQ(done[0].samples[1].sample().key().index_in_group(), 1);
  const GroupTracker::Stats stats = tracker.stats();
  EXPECT_EQ(stats.accepted, 2u);
  EXPECT_EQ(stats.groups_completed, 1u);
  EXPECT_EQ(stats.samples_buffered, 0);
}

TEST(GroupTrackerTest, AResentSampleIsADuplicateBeforeAndAfterTraining) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(Item("g", 2)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  EXPECT_EQ(Status(tracker, Scored("g", 0)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Scored("g", 0)), v1::SampleAck::DUPLICATE);
  EXPECT_EQ(Status(tracker, Scored("g", 1)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(tracker.TakeCompleted().size(), 1u);
  EXPECT_EQ(Status(tracker, Scored("g", 1)), v1::SampleAck::DUPLICATE);
  EXPECT_EQ(tracker.stats().accepted, 2u);
  EXPECT_EQ(tracker.stats().duplicate, 2u);
}

TEST(GroupTrackerTest, AStaleSampleReissuesItsGroupUnderAFreshId) {
  GroupTracker tracker({.max_staleness = 1});
  ASSERT_TRUE(tracker.Offer(Item("g", 2)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  tracker.SetPolicyVersion(3);
  EXPECT_EQ(Status(tracker, Scored("g", 0, /*version=*/2)), v1::SampleAck::ACCEPTED);
  absl::StatusOr<v1::SampleAck> stale = tracker.Deliver(Scored("g", 1, /*version=*/1));
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->status(), v1::SampleAck::STALE);
  EXPECT_THAT(stale->reason(), HasSubstr("2 behind 3"));
  std::vector<v1::WorkItem> again = tracker.Take("w2", 1, absl::ZeroDuration());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].group_id(), "g~r1");
  EXPECT_EQ(again[0].attempt(), 1);
  // Sampled again under the current policy at least, so a worker still on
  // older weights cannot make it stale again.
  EXPECT_EQ(again[0].min_policy_version(), 3);
  // The first attempt is gone: its late samples count, unused.
  EXPECT_EQ(Status(tracker, Scored("g", 1, 3)), v1::SampleAck::ORPHANED);
  EXPECT_EQ(Status(tracker, Scored("g~r1", 0, 3)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Scored("g~r1", 1, 3)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(tracker.TakeCompleted().size(), 1u);
  EXPECT_EQ(tracker.stats().groups_reissued, 1u);
  EXPECT_EQ(tracker.stats().samples_buffered, 0);
}

TEST(GroupTrackerTest, AnEvaluationGroupIsNeverStale) {
  GroupTracker tracker({.max_staleness = 1});
  v1::WorkItem item = Item("e", 2);
  item.set_eval(true);
  ASSERT_TRUE(tracker.Offer(item).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  tracker.SetPolicyVersion(9);
  EXPECT_EQ(Status(tracker, Scored("e", 0, /*version=*/1)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Scored("e", 1, /*version=*/2)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(tracker.TakeCompleted().size(), 1u);
  EXPECT_EQ(tracker.stats().groups_reissued, 0u);
}

TEST(GroupTrackerTest, AGroupThatTimesOutIsReissuedOnceThenDropped) {
  GroupTracker tracker({.group_timeout = absl::Seconds(10), .max_reissues = 1});
  ASSERT_TRUE(tracker.Offer(Item("g", 2)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  tracker.Expire(absl::Now() + absl::Seconds(5));
  EXPECT_EQ(tracker.stats().groups_reissued, 0u);
  tracker.Expire(absl::Now() + absl::Seconds(11));
  EXPECT_EQ(tracker.stats().groups_reissued, 1u);
  ASSERT_EQ(tracker.Take("w2", 1, absl::ZeroDuration()).size(), 1u);
  tracker.Expire(absl::Now() + absl::Seconds(11));
  EXPECT_EQ(tracker.stats().groups_dropped, 1u);
  EXPECT_TRUE(tracker.Take("w3", 1, absl::ZeroDuration()).empty());
  EXPECT_EQ(tracker.stats().groups_in_flight, 0);
}

TEST(GroupTrackerTest, GroupsOfAWorkerThatIsGoneAreReissued) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(Item("a", 1)).ok());
  ASSERT_TRUE(tracker.Offer(Item("b", 1)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  tracker.Take("w2", 1, absl::ZeroDuration());
  tracker.WorkerGone("w1");
  std::vector<v1::WorkItem> again = tracker.Take("w3", 4, absl::ZeroDuration());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].group_id(), "a~r1");
}

TEST(GroupTrackerTest, AGroupItsWorkerReleasesIsReissuedAtOnceThenDropped) {
  GroupTracker tracker({.group_timeout = absl::Seconds(600), .max_reissues = 1});
  ASSERT_TRUE(tracker.Offer(Item("g", 2)).ok());
  ASSERT_EQ(tracker.Take("w1", 1, absl::ZeroDuration()).size(), 1u);
  // Only the worker holding it may give it back, and only a live group.
  EXPECT_EQ(tracker.Release("w2", "g").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(tracker.Release("w1", "nope").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<bool> first = tracker.Release("w1", "g");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(*first);  // re-issued without waiting for the group timeout
  std::vector<v1::WorkItem> again = tracker.Take("w2", 1, absl::ZeroDuration());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].group_id(), "g~r1");
  // The old id is gone: its late samples are orphaned, a second release is
  // NOT_FOUND.
  EXPECT_EQ(Status(tracker, Scored("g", 0)), v1::SampleAck::ORPHANED);
  EXPECT_EQ(tracker.Release("w1", "g").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<bool> second = tracker.Release("w2", "g~r1", "no room for 2 sequences");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(*second);  // attempts spent: dropped
  EXPECT_EQ(tracker.LastDropReason(), "released by worker w2: no room for 2 sequences");
  EXPECT_EQ(tracker.stats().groups_reissued, 1u);
  EXPECT_EQ(tracker.stats().groups_dropped, 1u);
  EXPECT_EQ(tracker.stats().groups_in_flight, 0);
  EXPECT_TRUE(tracker.Take("w3", 1, absl::ZeroDuration()).empty());
}

TEST(GroupTrackerTest, MalformedSamplesAreRejectedWithTheReason) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(Item("g", 2)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  auto reason = [&](v1::ScoredSample s) {
    absl::StatusOr<v1::SampleAck> ack = tracker.Deliver(s);
    EXPECT_EQ(ack->status(), v1::SampleAck::REJECTED);
    return ack->reason();
  };
  v1::ScoredSample no_id = Scored("g", 0);
  no_id.mutable_sample()->mutable_key()->clear_sample_id();
  EXPECT_THAT(reason(no_id), HasSubstr("sample_id: is required"));
  EXPECT_THAT(reason(Scored("g", 5)), HasSubstr("index_in_group: 5 outside [0, 2)"));
  v1::ScoredSample wrong_id = Scored("g", 0);
  wrong_id.mutable_sample()->mutable_key()->set_sample_id("job-1/g/1");
  EXPECT_THAT(reason(wrong_id), HasSubstr("do not match"));
  v1::ScoredSample unpaired = Scored("g", 0);
  unpaired.mutable_sample()->add_completion_tokens(8);
  EXPECT_THAT(reason(unpaired), HasSubstr("1 log-probs for 2 completion tokens"));
  v1::ScoredSample no_verdict = Scored("g", 0);
  no_verdict.clear_verdict();
  EXPECT_THAT(reason(no_verdict), HasSubstr("verdict"));
  EXPECT_EQ(tracker.stats().rejected, 5u);
  EXPECT_EQ(Status(tracker, Scored("g", 0)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Scored("unknown", 0)), v1::SampleAck::ORPHANED);
  EXPECT_FALSE(tracker.Offer(Item("g", 2)).ok()) << "a group id in use was offered again";
}

TEST(GroupTrackerTest, AFullBufferAsksForARetryAndRecordsNothing) {
  GroupTracker tracker({.max_buffered_samples = 2});
  ASSERT_TRUE(tracker.Offer(Item("a", 2)).ok());
  ASSERT_TRUE(tracker.Offer(Item("b", 1)).ok());
  tracker.Take("w1", 2, absl::ZeroDuration());
  EXPECT_EQ(Status(tracker, Scored("a", 0)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Scored("a", 1)), v1::SampleAck::ACCEPTED);
  absl::StatusOr<v1::SampleAck> full = tracker.Deliver(Scored("b", 0));
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(tracker.TakeCompleted().size(), 1u);
  EXPECT_EQ(Status(tracker, Scored("b", 0)), v1::SampleAck::ACCEPTED);
}

TEST(GroupTrackerTest, GroupsStillFillingAreNeverShutOutByTheBufferBound) {
  GroupTracker tracker({.max_buffered_samples = 2});
  ASSERT_TRUE(tracker.Offer(Item("big", 3)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Status(tracker, Scored("big", i)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(tracker.TakeCompleted().size(), 1u);
}

TEST(GroupTrackerTest, AGroupIdIsNeverOfferedTwice) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(Item("g", 1)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  EXPECT_EQ(Status(tracker, Scored("g", 0)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(tracker.TakeCompleted().size(), 1u);
  EXPECT_THAT(tracker.Offer(Item("g", 1)).message(), HasSubstr("already used"));
}

TEST(GroupTrackerTest, TakeWaitsForWorkOffered) {
  GroupTracker tracker({});
  EXPECT_TRUE(tracker.Take("w1", 1, absl::Milliseconds(20)).empty());
  std::thread offer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_TRUE(tracker.Offer(Item("late", 1)).ok());
  });
  std::vector<v1::WorkItem> items = tracker.Take("w1", 1, absl::Seconds(30));
  offer.join();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].group_id(), "late");
}

// What the job driver counts against its offering window: a group that
// completed is the tracker's until the trainer takes it.
TEST(GroupTrackerTest, UntakenGroupsCountsCompleteGroupsUntilTheTrainerTakesThem) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(Item("a", 1)).ok());
  ASSERT_TRUE(tracker.Offer(Item("b", 2)).ok());
  v1::WorkItem eval = Item("e", 1);
  eval.set_eval(true);
  ASSERT_TRUE(tracker.Offer(eval).ok());
  v1::WorkItem other = Item("c", 1);
  other.set_job_id("job-2");
  ASSERT_TRUE(tracker.Offer(other).ok());
  EXPECT_EQ(tracker.UntakenGroups("job-1").all, 2);  // evaluation groups are not counted
  ASSERT_EQ(tracker.Take("w", 4, absl::ZeroDuration()).size(), 4u);
  EXPECT_EQ(tracker.UntakenGroups("job-1").all, 2);  // issued still counts
  EXPECT_EQ(Status(tracker, Scored("a", 0)), v1::SampleAck::ACCEPTED);  // a complete
  EXPECT_EQ(tracker.UntakenGroups("job-1").all, 2);
  ASSERT_EQ(tracker.TakeCompleted().size(), 1u);
  EXPECT_EQ(tracker.UntakenGroups("job-1").all, 1);
  EXPECT_EQ(tracker.UntakenGroups("job-2").all, 1);
  tracker.DropJob("job-1");
  EXPECT_EQ(tracker.UntakenGroups("job-1").all, 0);
}

// What the job's end waits for: its held-out and warm-up groups, counted
// apart from training ones until taken, and not once dropped (a dropped
// group never comes back, so nothing should wait for it).
TEST(GroupTrackerTest, UntakenGroupsCountsEvaluationAndWarmUpGroupsAsRounds) {
  GroupTracker tracker({.max_reissues = 0});
  v1::WorkItem eval = Item("e", 1);
  eval.set_eval(true);
  v1::WorkItem warm_up = Item("w", 1);
  warm_up.set_warm_up(true);
  v1::WorkItem other_job = Item("o", 1);
  other_job.set_job_id("job-2");
  other_job.set_warm_up(true);
  ASSERT_TRUE(tracker.Offer({Item("t", 1), eval, warm_up, other_job}).ok());
  EXPECT_EQ(tracker.UntakenGroups("job-1").rounds, 2);
  EXPECT_EQ(tracker.UntakenGroups("job-1").all, 1);
  ASSERT_EQ(tracker.Take("w1", 4, absl::ZeroDuration()).size(), 4u);
  EXPECT_EQ(tracker.UntakenGroups("job-1").rounds, 2);  // issued still counts
  EXPECT_EQ(Status(tracker, Scored("e", 0)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(tracker.UntakenGroups("job-1").rounds, 2);  // complete, not taken
  ASSERT_EQ(tracker.TakeCompleted().size(), 1u);
  EXPECT_EQ(tracker.UntakenGroups("job-1").rounds, 1);
  absl::StatusOr<bool> released = tracker.Release("w1", "w", "cannot sample it");
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(*released);  // dropped
  EXPECT_EQ(tracker.UntakenGroups("job-1").rounds, 0);
  EXPECT_EQ(tracker.UntakenGroups("job-2").rounds, 1);
}

// A group offered under an older policy cannot serve a later step within
// the staleness bound: the job driver asks only for those offered since.
TEST(GroupTrackerTest, UntakenGroupsCountsOnlyGroupsOfferedFromAVersionOn) {
  GroupTracker tracker({});
  for (int version = 3; version <= 5; ++version) {
    v1::WorkItem item = Item(absl::StrCat("v", version), 1);
    item.set_min_policy_version(version);
    ASSERT_TRUE(tracker.Offer(item).ok());
  }
  EXPECT_EQ(tracker.UntakenGroups("job-1").offered_from, 3);
  EXPECT_EQ(tracker.UntakenGroups("job-1", 4).offered_from, 2);
  EXPECT_EQ(tracker.UntakenGroups("job-1", 4).all, 3);
  ASSERT_EQ(tracker.Take("w", 3, absl::ZeroDuration()).size(), 3u);
  EXPECT_EQ(Status(tracker, Scored("v5", 0, 5)), v1::SampleAck::ACCEPTED);  // complete, untaken
  EXPECT_EQ(tracker.UntakenGroups("job-1", 5).offered_from, 1);
  EXPECT_EQ(tracker.UntakenGroups("job-1", 6).offered_from, 0);
}

TEST(GroupTrackerTest, DroppingAJobOrphansItsLateSamplesAndFreesTheBuffer) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(Item("a", 2)).ok());
  ASSERT_TRUE(tracker.Offer(Item("b", 1)).ok());
  ASSERT_EQ(tracker.Take("w", 2, absl::ZeroDuration()).size(), 2u);
  EXPECT_EQ(Status(tracker, Scored("a", 0)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Scored("b", 0)), v1::SampleAck::ACCEPTED);  // b complete
  tracker.DropJob("job-1");
  EXPECT_EQ(tracker.UntakenGroups("job-1").all, 0);
  EXPECT_TRUE(tracker.TakeCompleted().empty());
  EXPECT_EQ(tracker.stats().samples_buffered, 0);
  EXPECT_EQ(Status(tracker, Scored("a", 1)), v1::SampleAck::ORPHANED);
  EXPECT_EQ(Status(tracker, Scored("a", 0)), v1::SampleAck::DUPLICATE);  // still remembered
  EXPECT_TRUE(tracker.Take("w", 1, absl::ZeroDuration()).empty());
}

TEST(GroupTrackerTest, TakeCompletedWaitsForAGroupToComplete) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(Item("g", 1)).ok());
  ASSERT_EQ(tracker.Take("w", 1, absl::ZeroDuration()).size(), 1u);
  std::thread deliver([&] {
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_EQ(Status(tracker, Scored("g", 0)), v1::SampleAck::ACCEPTED);
  });
  EXPECT_EQ(tracker.TakeCompleted(absl::Seconds(30)).size(), 1u);
  deliver.join();
  EXPECT_TRUE(tracker.TakeCompleted(absl::Milliseconds(10)).empty());
}

TEST(GroupTrackerTest, JobBoundsReplaceTheStalenessLimit) {
  GroupTracker tracker({.max_staleness = 0});
  tracker.SetJobBounds({.group_timeout = absl::Seconds(600), .max_staleness = 2});
  tracker.SetPolicyVersion(2);
  ASSERT_TRUE(tracker.Offer(Item("g", 1)).ok());
  ASSERT_EQ(tracker.Take("w", 1, absl::ZeroDuration()).size(), 1u);
  EXPECT_EQ(Status(tracker, Scored("g", 0, /*version=*/0)), v1::SampleAck::ACCEPTED);
}

// Completes `n` groups of one sample, each after about `pace`.
void CompleteGroups(GroupTracker& tracker, const std::string& prefix, int n,
                    absl::Duration pace) {
  for (int i = 0; i < n; ++i) {
    const std::string id = absl::StrCat(prefix, i);
    ASSERT_TRUE(tracker.Offer(Item(id, 1)).ok());
    ASSERT_EQ(tracker.Take("w", 1, absl::ZeroDuration()).size(), 1u);
    absl::SleepFor(pace);
    ASSERT_EQ(Status(tracker, Scored(id, 0)), v1::SampleAck::ACCEPTED);
  }
  tracker.TakeCompleted();
}

TEST(GroupTrackerTest, TheWaitFollowsThePaceOfCompletedGroupsOnceEnoughAreSeen) {
  GroupTracker tracker({});
  tracker.SetJobBounds({.group_timeout = absl::Seconds(600),
                        .wait_factor = 4,
                        .wait_floor = absl::Milliseconds(100),
                        .min_observed = 3});
  // Too few groups seen: the ceiling.
  CompleteGroups(tracker, "early", 2, absl::Milliseconds(30));
  EXPECT_EQ(tracker.GroupWait(), absl::Seconds(600));
  CompleteGroups(tracker, "more", 1, absl::Milliseconds(30));
  const absl::Duration wait = tracker.GroupWait();
  // 4x the slowest (>= 30 ms, under a second on any machine), at least the floor.
  EXPECT_GE(wait, absl::Milliseconds(120));
  EXPECT_LT(wait, absl::Seconds(10));

  // A group missing a sample is re-issued after the pace bound, long before
  // the ceiling; its accepted sample is discarded, not counted twice.
  ASSERT_TRUE(tracker.Offer(Item("lost", 2)).ok());
  const absl::Time issued = absl::Now();
  ASSERT_EQ(tracker.Take("w", 1, absl::ZeroDuration()).size(), 1u);
  ASSERT_EQ(Status(tracker, Scored("lost", 0)), v1::SampleAck::ACCEPTED);
  tracker.Expire(issued + wait / 2);
  EXPECT_EQ(tracker.stats().groups_reissued, 0u);
  tracker.Expire(absl::Now() + wait + absl::Milliseconds(1));
  EXPECT_EQ(tracker.stats().groups_reissued, 1u);
  EXPECT_EQ(tracker.stats().samples_discarded, 1u);
  // The re-issue's attempts are spent: the pace bound leaves it, only the
  // ceiling drops it.
  ASSERT_EQ(tracker.Take("w", 1, absl::ZeroDuration()).size(), 1u);
  tracker.Expire(absl::Now() + wait + absl::Milliseconds(1));
  EXPECT_EQ(tracker.stats().groups_dropped, 0u);
  tracker.Expire(absl::Now() + absl::Seconds(601));
  EXPECT_EQ(tracker.stats().groups_dropped, 1u);

  // The floor holds when groups come back at once, and the ceiling caps it.
  tracker.SetJobBounds({.group_timeout = absl::Seconds(600),
                        .wait_factor = 4,
                        .wait_floor = absl::Seconds(7),
                        .min_observed = 1});
  EXPECT_EQ(tracker.GroupWait(), absl::Seconds(600)) << "a new job forgets the old pace";
  CompleteGroups(tracker, "fast", 1, absl::ZeroDuration());
  EXPECT_EQ(tracker.GroupWait(), absl::Seconds(7));
  tracker.SetJobBounds({.group_timeout = absl::Milliseconds(50),
                        .wait_factor = 1000,
                        .wait_floor = absl::Seconds(7),
                        .min_observed = 1});
  CompleteGroups(tracker, "capped", 1, absl::ZeroDuration());
  EXPECT_EQ(tracker.GroupWait(), absl::Milliseconds(50));
}

TEST(GroupTrackerTest, WithoutAPaceFactorTheWaitIsTheGroupTimeout) {
  GroupTracker tracker({});
  tracker.SetJobBounds({.group_timeout = absl::Seconds(90), .wait_factor = 0, .min_observed = 1});
  CompleteGroups(tracker, "g", 3, absl::ZeroDuration());
  EXPECT_EQ(tracker.GroupWait(), absl::Seconds(90));
}

TEST(GroupTrackerTest, EveryAcceptedSampleIsInExactlyOnePlaceOfTheLedger) {
  GroupTracker tracker({.group_timeout = absl::Seconds(10), .max_reissues = 1});
  auto balanced = [&] {
    const GroupTracker::Stats s = tracker.stats();
    return s.accepted ==
           s.samples_completed + s.samples_discarded + static_cast<uint64_t>(s.samples_held);
  };
  for (const char* id : {"done", "retired", "stale", "kept", "job"}) {
    ASSERT_TRUE(tracker.Offer(Item(id, 3)).ok());
  }
  ASSERT_EQ(tracker.Take("w", 5, absl::ZeroDuration()).size(), 5u);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Status(tracker, Scored("done", i)), v1::SampleAck::ACCEPTED);
  ASSERT_EQ(Status(tracker, Scored("retired", 0)), v1::SampleAck::ACCEPTED);
  ASSERT_EQ(Status(tracker, Scored("stale", 0)), v1::SampleAck::ACCEPTED);
  ASSERT_EQ(Status(tracker, Scored("kept", 1)), v1::SampleAck::ACCEPTED);
  ASSERT_EQ(Status(tracker, Scored("job", 2)), v1::SampleAck::ACCEPTED);
  EXPECT_TRUE(balanced());
  EXPECT_EQ(tracker.stats().samples_held, 4);
  // Duplicates, orphans and rejections are not accepted: the ledger ignores them.
  EXPECT_EQ(Status(tracker, Scored("done", 1)), v1::SampleAck::DUPLICATE);
  EXPECT_EQ(Status(tracker, Scored("nowhere", 0)), v1::SampleAck::ORPHANED);
  ASSERT_TRUE(tracker.Release("w", "retired", "test").ok());
  tracker.SetPolicyVersion(5);
  EXPECT_EQ(Status(tracker, Scored("stale", 1, /*version=*/0)), v1::SampleAck::STALE);
  EXPECT_TRUE(balanced());
  tracker.TakeCompleted();
  EXPECT_TRUE(balanced());
  const GroupTracker::Stats s = tracker.stats();
  EXPECT_EQ(s.samples_completed, 3u);
  EXPECT_EQ(s.samples_discarded, 2u);  // "retired" and "stale" held one each
  EXPECT_EQ(s.samples_held, 2);        // "kept" and "job"
  tracker.DropJob("job-1");
  EXPECT_TRUE(balanced());
  EXPECT_EQ(tracker.stats().samples_held, 0);
  EXPECT_EQ(tracker.stats().samples_discarded, 4u);
}

TEST(GroupTrackerTest, TheWaitingLineNamesMissingSamplesAndTheirWorker) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(Item("g", 4)).ok());
  ASSERT_TRUE(tracker.Offer(Item("h", 2)).ok());
  ASSERT_EQ(tracker.Take("worker-7", 1, absl::ZeroDuration()).size(), 1u);
  ASSERT_EQ(Status(tracker, Scored("g", 0)), v1::SampleAck::ACCEPTED);
  ASSERT_EQ(Status(tracker, Scored("g", 2)), v1::SampleAck::ACCEPTED);
  const std::string line = tracker.DescribeWaiting("job-1");
  EXPECT_THAT(line, HasSubstr("group g on worker worker-7 for "));
  EXPECT_THAT(line, HasSubstr("samples 1,3 of 4 missing"));
  EXPECT_THAT(line, HasSubstr("1 not yet taken by a worker"));
  EXPECT_EQ(tracker.DescribeWaiting("other-job"), "nothing in flight");
}

// Multi-turn groups (MultiTurnSpec): trajectories of turns, complete once
// each has a run of turns from 0 to one the end rule ends.
v1::WorkItem TurnItem(const std::string& group, int size, int max_turns) {
  v1::WorkItem item = Item(group, size);
  item.mutable_multi_turn()->set_max_turns(max_turns);
  item.mutable_multi_turn()->set_stop_speedup(1.0);
  return item;
}

// Turn `turn` of trajectory `index`: correct (which ends it: not timed) or
// failed at compile (which asks for another turn).
v1::ScoredSample Turn(const std::string& group, int index, int turn, bool correct,
                      int64_t version = 0) {
  v1::ScoredSample scored = Scored(group, index, version);
  v1::SampleKey* key = scored.mutable_sample()->mutable_key();
  key->set_turn(turn);
  if (turn > 0) key->set_sample_id(absl::StrCat(key->sample_id(), "/t", turn));
  v1::Verdict* verdict = scored.mutable_verdict();
  verdict->set_correct(correct);
  v1::StageResult* stage = verdict->add_stages();
  stage->set_stage(v1::STAGE_COMPILE);
  stage->set_outcome(correct ? v1::OUTCOME_PASSED : v1::OUTCOME_FAILED);
  return scored;
}

void ExpectLedgerBalances(const GroupTracker& tracker) {
  const GroupTracker::Stats s = tracker.stats();
  EXPECT_EQ(static_cast<int64_t>(s.accepted),
            static_cast<int64_t>(s.samples_completed + s.samples_discarded) + s.samples_held);
}

TEST(GroupTrackerTurnsTest, AGroupCompletesOnceEveryTrajectoryReachesATurnThatEndsIt) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(TurnItem("g", 2, 3)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  EXPECT_EQ(Status(tracker, Turn("g", 0, 0, false)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Turn("g", 1, 0, true)), v1::SampleAck::ACCEPTED);
  EXPECT_TRUE(tracker.TakeCompleted().empty());  // trajectory 0 goes on
  EXPECT_EQ(Status(tracker, Turn("g", 0, 1, true, /*version=*/1)), v1::SampleAck::ACCEPTED);
  std::vector<CompletedGroup> done = tracker.TakeCompleted();
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(done[0].samples.size(), 3u);
  EXPECT_EQ(done[0].samples[0].sample().key().sample_id(), "job-1/g/0");
  EXPECT_EQ(done[0].samples[1].sample().key().sample_id(), "job-1/g/0/t1");
  EXPECT_EQ(done[0].samples[1].sample().policy_version(), 1);
  EXPECT_EQ(done[0].samples[2].sample().key().sample_id(), "job-1/g/1");
  EXPECT_EQ(tracker.stats().samples_completed, 3u);
  ExpectLedgerBalances(tracker);
}

TEST(GroupTrackerTurnsTest, ATrajectoryEndsAtItsLastAllowedTurn) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(TurnItem("g", 1, 2)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  EXPECT_EQ(Status(tracker, Turn("g", 0, 0, false)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Turn("g", 0, 1, false)), v1::SampleAck::ACCEPTED);
  ASSERT_EQ(tracker.TakeCompleted().size(), 1u);
}

TEST(GroupTrackerTurnsTest, ATurnAfterItsTrajectoryEndedIsOrphaned) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(TurnItem("g", 2, 3)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  EXPECT_EQ(Status(tracker, Turn("g", 0, 0, true)), v1::SampleAck::ACCEPTED);
  absl::StatusOr<v1::SampleAck> late = tracker.Deliver(Turn("g", 0, 1, true));
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->status(), v1::SampleAck::ORPHANED);
  EXPECT_THAT(late->reason(), HasSubstr("ended at turn 0"));
  EXPECT_EQ(Status(tracker, Turn("g", 0, 0, true)), v1::SampleAck::DUPLICATE);
  EXPECT_EQ(Status(tracker, Turn("g", 1, 0, true)), v1::SampleAck::ACCEPTED);
  ASSERT_EQ(tracker.TakeCompleted().size(), 1u);
  EXPECT_EQ(tracker.stats().accepted, 2u);
  ExpectLedgerBalances(tracker);
}

TEST(GroupTrackerTurnsTest, TurnsMayArriveOutOfOrder) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(TurnItem("g", 1, 3)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  EXPECT_EQ(Status(tracker, Turn("g", 0, 2, true)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Turn("g", 0, 0, false)), v1::SampleAck::ACCEPTED);
  EXPECT_TRUE(tracker.TakeCompleted().empty());  // turn 1 is missing
  EXPECT_EQ(Status(tracker, Turn("g", 0, 1, false)), v1::SampleAck::ACCEPTED);
  std::vector<CompletedGroup> done = tracker.TakeCompleted();
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(done[0].samples.size(), 3u);
  for (int t = 0; t < 3; ++t) EXPECT_EQ(done[0].samples[t].sample().key().turn(), t);
  ExpectLedgerBalances(tracker);
}

TEST(GroupTrackerTurnsTest, ATurnHeldPastWhereAnEarlierTurnEndedItIsDiscarded) {
  // A worker that saw another verdict for turn 0 (a re-verification) went
  // on; the learner's verdict for turn 0 ends the trajectory there.
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(TurnItem("g", 1, 3)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  EXPECT_EQ(Status(tracker, Turn("g", 0, 1, true)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Turn("g", 0, 0, true)), v1::SampleAck::ACCEPTED);
  std::vector<CompletedGroup> done = tracker.TakeCompleted();
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(done[0].samples.size(), 1u);
  const GroupTracker::Stats stats = tracker.stats();
  EXPECT_EQ(stats.samples_completed, 1u);
  EXPECT_EQ(stats.samples_discarded, 1u);
  EXPECT_EQ(stats.samples_buffered, 0);
  ExpectLedgerBalances(tracker);
  EXPECT_EQ(Status(tracker, Turn("g", 0, 1, true)), v1::SampleAck::ORPHANED);
}

// The disagreement a re-verification makes (issue 24 review): the verifier
// that scored turn 0 as a failure delivered it and died before answering the
// rollout worker; another verifier scored it correct, which by itself would
// end the trajectory. Its delivery is a DUPLICATE, and the ack carries the
// learner's decision from the verdict it holds, so the worker samples the
// turn 1 the learner waits for instead of stopping and stalling the group.
TEST(GroupTrackerTurnsTest, AReverifiedTurnIsAnsweredWithTheLearnersEndRule) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(TurnItem("g", 1, 3)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  absl::StatusOr<v1::SampleAck> first = tracker.Deliver(Turn("g", 0, 0, /*correct=*/false));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->status(), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(first->next_turn(), v1::SampleAck::NEXT_TURN_WANTED);
  absl::StatusOr<v1::SampleAck> again = tracker.Deliver(Turn("g", 0, 0, /*correct=*/true));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status(), v1::SampleAck::DUPLICATE);
  EXPECT_EQ(again->next_turn(), v1::SampleAck::NEXT_TURN_WANTED);
  EXPECT_TRUE(tracker.TakeCompleted().empty());
  // The worker follows it: turn 1 completes the group.
  absl::StatusOr<v1::SampleAck> next = tracker.Deliver(Turn("g", 0, 1, true));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->next_turn(), v1::SampleAck::NEXT_TURN_NOT_WANTED);
  EXPECT_EQ(tracker.TakeCompleted().size(), 1u);
  ExpectLedgerBalances(tracker);
}

TEST(GroupTrackerTurnsTest, AReverifiedTurnTheLearnerEndedWantsNoNextTurn) {
  // The other way round: the learner holds the correct verdict (the
  // trajectory ended), the worker's re-verification failed it.
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(TurnItem("g", 2, 3)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  ASSERT_TRUE(tracker.Deliver(Turn("g", 0, 0, /*correct=*/true)).ok());
  absl::StatusOr<v1::SampleAck> again = tracker.Deliver(Turn("g", 0, 0, /*correct=*/false));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status(), v1::SampleAck::DUPLICATE);
  EXPECT_EQ(again->next_turn(), v1::SampleAck::NEXT_TURN_NOT_WANTED);
}

TEST(GroupTrackerTurnsTest, TurnsOfARetiredGroupWantNoNextTurn) {
  // The worker keeps a trajectory's books until it hears the trajectory
  // ended: a group the learner retired says so at its next delivery.
  GroupTracker tracker({.max_reissues = 1});
  ASSERT_TRUE(tracker.Offer(TurnItem("g", 1, 3)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  tracker.WorkerGone("w1");  // re-issued as g~r1
  absl::StatusOr<v1::SampleAck> late = tracker.Deliver(Turn("g", 0, 0, /*correct=*/false));
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->status(), v1::SampleAck::ORPHANED);
  EXPECT_EQ(late->next_turn(), v1::SampleAck::NEXT_TURN_NOT_WANTED);
}

TEST(GroupTrackerTurnsTest, ARetiredGroupDiscardsEveryTurnItHeld) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(TurnItem("g", 2, 3)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  EXPECT_EQ(Status(tracker, Turn("g", 0, 0, false)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Turn("g", 0, 1, false)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Turn("g", 1, 0, false)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(tracker.stats().samples_held, 3);
  ASSERT_TRUE(tracker.Release("w1", "g").ok());
  GroupTracker::Stats stats = tracker.stats();
  EXPECT_EQ(stats.samples_discarded, 3u);
  EXPECT_EQ(stats.samples_held, 0);
  EXPECT_EQ(stats.samples_buffered, 0);
  ExpectLedgerBalances(tracker);
  // The old attempt's turns are orphaned; the re-issue starts afresh.
  EXPECT_EQ(Status(tracker, Turn("g", 0, 2, true)), v1::SampleAck::ORPHANED);
  std::vector<v1::WorkItem> again = tracker.Take("w2", 1, absl::ZeroDuration());
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].multi_turn().max_turns(), 3);
  EXPECT_EQ(Status(tracker, Turn("g~r1", 0, 0, true)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(Status(tracker, Turn("g~r1", 1, 0, true)), v1::SampleAck::ACCEPTED);
  EXPECT_EQ(tracker.TakeCompleted().size(), 1u);
  ExpectLedgerBalances(tracker);
}

TEST(GroupTrackerTurnsTest, ATurnOutsideTheSpecOrWithTheWrongIdIsRejected) {
  GroupTracker tracker({});
  ASSERT_TRUE(tracker.Offer(TurnItem("g", 1, 2)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  absl::StatusOr<v1::SampleAck> beyond = tracker.Deliver(Turn("g", 0, 2, false));
  ASSERT_TRUE(beyond.ok());
  EXPECT_EQ(beyond->status(), v1::SampleAck::REJECTED);
  EXPECT_THAT(beyond->reason(), HasSubstr("sample.key.turn: 2 outside [0, 2)"));
  v1::ScoredSample unsuffixed = Turn("g", 0, 1, false);
  unsuffixed.mutable_sample()->mutable_key()->set_sample_id("job-1/g/0");
  EXPECT_EQ(Status(tracker, unsuffixed), v1::SampleAck::REJECTED);
  // A single-turn group takes no later turn.
  ASSERT_TRUE(tracker.Offer(Item("s", 1)).ok());
  tracker.Take("w1", 1, absl::ZeroDuration());
  EXPECT_EQ(Status(tracker, Turn("s", 0, 1, false)), v1::SampleAck::REJECTED);
}

}  // namespace
}  // namespace kforge
