// Reference epochs: shared within a batch, new seeds for a new batch, after
// the use limit or the age limit; one computation however many candidates
// of a task arrive at once; bounded memory; the next batch's epoch made
// ahead of its candidates.
#include "verifier_worker/funnel/reference_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "verifier_worker/funnel/baseline_cache.h"

namespace kforge {
namespace {

class ReferenceCacheTest : public ::testing::Test {
 protected:
  // An epoch whose payload is `bytes` long, counting how many were made.
  ReferenceCache::Maker Maker(int64_t bytes = 16) {
    return [this, bytes]() -> absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> {
      auto epoch = std::make_shared<ReferenceEpoch>();
      epoch->init_seed = static_cast<uint64_t>(++made_);
      epoch->prepared.payload.assign(static_cast<size_t>(bytes), 'x');
      return std::shared_ptr<const ReferenceEpoch>(std::move(epoch));
    };
  }
  std::shared_ptr<const ReferenceEpoch> Get(ReferenceCache& cache, const std::string& scope,
                                            const std::string& batch,
                                            ReferenceCache::Reuse reuse, bool* reused) {
    absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> got =
        cache.Get(scope, batch, reuse, Maker(), reused);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *got : nullptr;
  }

  std::atomic<int> made_{0};
  const ReferenceCache::Reuse kLong{.max_uses = 100, .max_age = absl::Hours(1)};
};

TEST_F(ReferenceCacheTest, CandidatesOfOneBatchShareAnEpochAndANewBatchDrawsANewOne) {
  ReferenceCache cache(1 << 20);
  bool reused = true;
  auto first = Get(cache, "task", "v1", kLong, &reused);
  EXPECT_FALSE(reused);
  auto second = Get(cache, "task", "v1", kLong, &reused);
  EXPECT_TRUE(reused);
  EXPECT_EQ(first.get(), second.get());
  auto next_batch = Get(cache, "task", "v2", kLong, &reused);
  EXPECT_FALSE(reused);
  EXPECT_NE(next_batch->init_seed, first->init_seed);
  EXPECT_EQ(made_, 2);
  // Another task has its own epoch.
  Get(cache, "other", "v2", kLong, &reused);
  EXPECT_FALSE(reused);
}

TEST_F(ReferenceCacheTest, AnEpochEndsAfterItsUsesOrItsAge) {
  ReferenceCache cache(1 << 20);
  bool reused = false;
  const ReferenceCache::Reuse two{.max_uses = 2, .max_age = absl::Hours(1)};
  Get(cache, "task", "", two, &reused);
  Get(cache, "task", "", two, &reused);
  EXPECT_TRUE(reused);
  Get(cache, "task", "", two, &reused);
  EXPECT_FALSE(reused);
  EXPECT_EQ(made_, 2);
  const ReferenceCache::Reuse young{.max_uses = 100, .max_age = absl::Milliseconds(1)};
  Get(cache, "aged", "", young, &reused);
  absl::SleepFor(absl::Milliseconds(5));
  Get(cache, "aged", "", young, &reused);
  EXPECT_FALSE(reused);
}

TEST_F(ReferenceCacheTest, ConcurrentCandidatesOfATaskWaitForOneComputation) {
  ReferenceCache cache(1 << 20);
  absl::Notification release;
  std::atomic<int> makes{0};
  ReferenceCache::Maker slow = [&]() -> absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> {
    ++makes;
    release.WaitForNotification();
    return std::make_shared<const ReferenceEpoch>();
  };
  std::vector<std::thread> threads;
  std::atomic<int> reused_count{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      bool reused = false;
      ASSERT_TRUE(cache.Get("task", "v1", kLong, slow, &reused).ok());
      reused_count += reused;
    });
  }
  absl::SleepFor(absl::Milliseconds(50));
  release.Notify();
  for (auto& t : threads) t.join();
  EXPECT_EQ(makes, 1);
  EXPECT_EQ(reused_count, 7);
}

TEST_F(ReferenceCacheTest, TwoBatchesInFlightKeepTheirOwnEpochs) {
  // Asynchronous training: candidates of versions 12 and 13 interleave.
  ReferenceCache cache(1 << 20);
  bool reused = false;
  auto v12 = Get(cache, "task", "v12", kLong, &reused);
  auto v13 = Get(cache, "task", "v13", kLong, &reused);
  EXPECT_EQ(Get(cache, "task", "v12", kLong, &reused).get(), v12.get());
  EXPECT_TRUE(reused);
  EXPECT_EQ(Get(cache, "task", "v13", kLong, &reused).get(), v13.get());
  EXPECT_TRUE(reused);
  EXPECT_EQ(made_, 2);
}

TEST_F(ReferenceCacheTest, CandidatesWaitingOnAFailedComputationGetItsErrorAtOnce) {
  ReferenceCache cache(1 << 20);
  absl::Notification release;
  std::atomic<int> makes{0};
  ReferenceCache::Maker failing = [&]() -> absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> {
    ++makes;
    release.WaitForNotification();
    return absl::FailedPreconditionError("reference raised");
  };
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      bool reused = false;
      failed += !cache.Get("task", "v1", kLong, failing, &reused).ok();
    });
  }
  absl::SleepFor(absl::Milliseconds(50));
  release.Notify();
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed, 6);
  EXPECT_EQ(makes, 1) << "the waiters must not each try again in turn";
}

TEST_F(ReferenceCacheTest, AFailedComputationIsReturnedAndNotKept) {
  ReferenceCache cache(1 << 20);
  bool reused = false;
  ReferenceCache::Maker failing = [] {
    return absl::StatusOr<std::shared_ptr<const ReferenceEpoch>>(
        absl::FailedPreconditionError("reference raised"));
  };
  EXPECT_EQ(cache.Get("task", "v1", kLong, failing, &reused).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Get(cache, "task", "v1", kLong, &reused);
  EXPECT_FALSE(reused);
  EXPECT_EQ(made_, 1);
}

TEST_F(ReferenceCacheTest, MemoryIsBoundedByDroppingTheLeastRecentlyUsedEpoch) {
  ReferenceCache cache(250);
  bool reused = false;
  ASSERT_TRUE(cache.Get("a", "", kLong, Maker(100), &reused).ok());
  ASSERT_TRUE(cache.Get("b", "", kLong, Maker(100), &reused).ok());
  absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> held =
      cache.Get("a", "", kLong, Maker(100), &reused);  // a is now the more recent
  ASSERT_TRUE(reused);
  ASSERT_TRUE(cache.Get("c", "", kLong, Maker(100), &reused).ok());
  EXPECT_EQ(cache.size(), 2);
  EXPECT_LE(cache.bytes(), 250);
  cache.Get("a", "", kLong, Maker(100), &reused).IgnoreError();
  EXPECT_TRUE(reused) << "the recently used epoch stays";
  cache.Get("b", "", kLong, Maker(100), &reused).IgnoreError();
  EXPECT_FALSE(reused) << "the least recently used one went";
  // A dropped epoch lives on while a verification holds it.
  EXPECT_EQ((*held)->prepared.payload.size(), 100u);
}

TEST_F(ReferenceCacheTest, AnEpochMadeAheadServesItsBatchsFirstCandidate) {
  ReferenceCache cache(1 << 20);
  bool reused = false;
  Get(cache, "task", "v8", kLong, &reused);
  EXPECT_FALSE(cache.Holds("task", "v12"));
  absl::StatusOr<bool> ahead = cache.Prefetch("task", "v12", Maker());
  ASSERT_TRUE(ahead.ok()) << ahead.status();
  EXPECT_TRUE(*ahead);
  EXPECT_TRUE(cache.Holds("task", "v12"));
  EXPECT_EQ(made_, 2);
  auto first = Get(cache, "task", "v12", kLong, &reused);
  EXPECT_TRUE(reused) << "the batch's first candidate finds its epoch made";
  EXPECT_EQ(made_, 2);
  // Made ahead it counts no use: the batch gets its whole candidate budget.
  const ReferenceCache::Reuse one{.max_uses = 1, .max_age = absl::Hours(1)};
  ASSERT_TRUE(cache.Prefetch("task", "v16", Maker()).ok());
  Get(cache, "task", "v16", one, &reused);
  EXPECT_TRUE(reused);
  Get(cache, "task", "v16", one, &reused);
  EXPECT_FALSE(reused) << "one use, then new seeds";
  // Held already: no second make.
  const int before = made_;
  ahead = cache.Prefetch("task", "v12", Maker());
  ASSERT_TRUE(ahead.ok());
  EXPECT_FALSE(*ahead);
  EXPECT_EQ(made_, before);
}

TEST_F(ReferenceCacheTest, ACandidateArrivingDuringAMakeAheadWaitsForItInsteadOfMakingItsOwn) {
  ReferenceCache cache(1 << 20);
  absl::Notification started, release;
  std::atomic<int> makes{0};
  ReferenceCache::Maker slow = [&]() -> absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> {
    ++makes;
    started.Notify();
    release.WaitForNotification();
    return std::make_shared<const ReferenceEpoch>();
  };
  std::thread ahead([&] { EXPECT_TRUE(*cache.Prefetch("task", "v12", slow)); });
  started.WaitForNotification();
  bool reused = false;
  std::thread candidate([&] { ASSERT_TRUE(cache.Get("task", "v12", kLong, slow, &reused).ok()); });
  absl::SleepFor(absl::Milliseconds(50));
  release.Notify();
  ahead.join();
  candidate.join();
  EXPECT_EQ(makes, 1);
  EXPECT_TRUE(reused);
}

TEST_F(ReferenceCacheTest, AFailedMakeAheadIsNotKeptNorTriedAgainAndTheBatchMakesItsOwn) {
  ReferenceCache cache(1 << 20);
  ReferenceCache::Maker failing = [] {
    return absl::StatusOr<std::shared_ptr<const ReferenceEpoch>>(
        absl::UnavailableError("reference server restarting"));
  };
  EXPECT_EQ(cache.Prefetch("task", "v12", failing).status().code(), absl::StatusCode::kUnavailable);
  // Not tried ahead again for every candidate of the batch that follows.
  EXPECT_TRUE(cache.Holds("task", "v12"));
  absl::StatusOr<bool> again = cache.Prefetch("task", "v12", failing);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(*again);
  bool reused = true;
  Get(cache, "task", "v12", kLong, &reused);
  EXPECT_FALSE(reused);
  EXPECT_EQ(made_, 1);
}

TEST_F(ReferenceCacheTest, AMakeAheadThatFailsIsNotTheFailureOfTheCandidatesWaitingForIt) {
  ReferenceCache cache(1 << 20);
  absl::Notification started, release;
  ReferenceCache::Maker failing = [&]() -> absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> {
    started.Notify();
    release.WaitForNotification();
    return absl::UnavailableError("reference server restarting");
  };
  std::thread ahead([&] { EXPECT_FALSE(cache.Prefetch("task", "v12", failing).ok()); });
  started.WaitForNotification();
  bool reused = true;
  absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> got;
  std::thread candidate([&] { got = cache.Get("task", "v12", kLong, Maker(), &reused); });
  absl::SleepFor(absl::Milliseconds(50));
  release.Notify();
  ahead.join();
  candidate.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(reused);
  EXPECT_EQ(made_, 1) << "the candidate made the epoch itself";
}

TEST_F(ReferenceCacheTest, AnEpochMadeAheadNeverPushesOutOneInUse) {
  ReferenceCache cache(250);
  bool reused = false;
  ASSERT_TRUE(cache.Get("a", "v8", kLong, Maker(100), &reused).ok());
  ASSERT_TRUE(cache.Get("b", "v8", kLong, Maker(100), &reused).ok());
  // No room for a third: the one made ahead goes, not a or b.
  ASSERT_TRUE(*cache.Prefetch("a", "v12", Maker(100)));
  EXPECT_LE(cache.bytes(), 250);
  EXPECT_EQ(cache.size(), 2);
  EXPECT_TRUE(cache.Get("a", "v8", kLong, Maker(100), &reused).ok());
  EXPECT_TRUE(reused);
  EXPECT_TRUE(cache.Get("b", "v8", kLong, Maker(100), &reused).ok());
  EXPECT_TRUE(reused);
  // Not made ahead again and again for every candidate of the batch: once
  // dropped, the batch's first candidate makes it.
  const int made = made_;
  EXPECT_TRUE(cache.Holds("a", "v12"));
  EXPECT_FALSE(*cache.Prefetch("a", "v12", Maker(100)));
  EXPECT_EQ(made_, made);
  ASSERT_TRUE(cache.Get("a", "v12", kLong, Maker(100), &reused).ok());
  EXPECT_FALSE(reused);
  EXPECT_EQ(made_, made + 1);
  // With room it stays, and once used it is an epoch like any other: the
  // least recently used goes for the next one.
  ReferenceCache roomy(350);
  ASSERT_TRUE(roomy.Get("a", "v8", kLong, Maker(100), &reused).ok());
  ASSERT_TRUE(roomy.Get("b", "v8", kLong, Maker(100), &reused).ok());
  ASSERT_TRUE(*roomy.Prefetch("a", "v12", Maker(100)));
  EXPECT_TRUE(roomy.Holds("a", "v12"));
  ASSERT_TRUE(roomy.Get("a", "v12", kLong, Maker(100), &reused).ok());
  EXPECT_TRUE(reused);
  ASSERT_TRUE(roomy.Get("c", "v8", kLong, Maker(100), &reused).ok());
  EXPECT_FALSE(roomy.Holds("a", "v8")) << "the least recently used";
  EXPECT_TRUE(roomy.Holds("a", "v12"));
}

v1::Timing Timed(double mean, double cv, int trials) {
  v1::Timing t;
  t.set_mean_ms(mean);
  t.set_median_ms(mean);
  t.set_cv(cv);
  t.set_trials(trials);
  return t;
}

TEST(BaselineDriftTest, AReCheckWithinToleranceKeepsTheCachedBaseline) {
  v1::TimingProtocol protocol;
  protocol.set_drift_tolerance(0.1);
  EXPECT_FALSE(Drifted(Timed(1.0, 0.01, 500), Timed(1.05, 0.01, 20), protocol));
  EXPECT_FALSE(Drifted(Timed(1.0, 0.01, 500), Timed(0.93, 0.01, 20), protocol));
}

TEST(BaselineDriftTest, AMachineThatSlowedDownOrSpedUpIsCaught) {
  v1::TimingProtocol protocol;
  protocol.set_drift_tolerance(0.1);
  EXPECT_TRUE(Drifted(Timed(1.0, 0.01, 500), Timed(1.3, 0.01, 20), protocol));
  EXPECT_TRUE(Drifted(Timed(1.0, 0.01, 500), Timed(0.7, 0.01, 20), protocol));
}

TEST(BaselineDriftTest, ANoisyShortReCheckNeedsMoreThanItsOwnSpread) {
  v1::TimingProtocol protocol;
  protocol.set_drift_tolerance(0.1);
  // 25% CV over 4 trials: a standard error of 12.5%; 1.3x is within 3 of them.
  EXPECT_FALSE(Drifted(Timed(1.0, 0.01, 500), Timed(1.3, 0.25, 4), protocol));
  EXPECT_FALSE(Drifted(Timed(1.0, 0.01, 500), Timed(1.3, 0.0, 0), protocol));
}

TEST(BaselineCacheTest, EntriesExpireWithAge) {
  BaselineCache cache;
  cache.Put("k", {.eager = Timed(1, 0, 10), .measured = absl::Now() - absl::Minutes(20)});
  EXPECT_FALSE(cache.Get("k", absl::Minutes(15)).has_value());
  EXPECT_TRUE(cache.Get("k", absl::Minutes(30)).has_value());
  EXPECT_FALSE(cache.Get("other", absl::Minutes(30)).has_value());
}

}  // namespace
}  // namespace kforge
