// ReferencePrefetcher: work made ahead runs on its own thread, each key once
// while it is queued or running, never more than the bound outstanding;
// Enqueue never waits; a make starts only once no candidate is in flight;
// what has not started when it is destroyed is dropped.
#include "verifier_worker/funnel/reference_prefetcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"

namespace kforge {
namespace {

using Queued = ReferencePrefetcher::Queued;

TEST(ReferencePrefetcherTest, EachKeyIsQueuedOnceAndTheBoundRefusesTheRestWithoutWaiting) {
  absl::Notification running, release;
  std::atomic<int> ran{0};
  std::thread::id caller = std::this_thread::get_id(), worker;
  {
    ReferencePrefetcher prefetcher(/*max_queued=*/2);
    ASSERT_EQ(prefetcher.Enqueue("task\x1fv12", [&](absl::Duration) {
                worker = std::this_thread::get_id();
                running.Notify();
                release.WaitForNotification();
                ++ran;
              }),
              Queued::kQueued);
    running.WaitForNotification();
    EXPECT_EQ(prefetcher.Enqueue("task\x1fv12", [&](absl::Duration) { ++ran; }), Queued::kDuplicate)
        << "running: the same epoch is not made twice";
    EXPECT_EQ(prefetcher.Enqueue("other\x1fv12", [&](absl::Duration) { ++ran; }), Queued::kQueued);
    EXPECT_EQ(prefetcher.Enqueue("third\x1fv12", [&](absl::Duration) { ++ran; }), Queued::kFull);
    EXPECT_EQ(prefetcher.pending(), 2);
    release.Notify();
    for (int i = 0; i < 500 && prefetcher.pending() > 0; ++i) absl::SleepFor(absl::Milliseconds(2));
    EXPECT_EQ(prefetcher.pending(), 0);
    EXPECT_EQ(ran, 2);
    // Done: the key can be queued again.
    EXPECT_EQ(prefetcher.Enqueue("task\x1fv12", [&](absl::Duration) { ++ran; }), Queued::kQueued);
  }
  EXPECT_NE(worker, caller) << "made on the prefetcher's thread";
}

TEST(ReferencePrefetcherTest, DestroyingItWaitsForTheRunningMakeAndDropsTheQueuedOnes) {
  absl::Notification running;
  std::atomic<bool> release{false};
  std::atomic<int> finished{0}, started{0};
  auto prefetcher = std::make_unique<ReferencePrefetcher>(/*max_queued=*/4);
  prefetcher->Enqueue("a", [&](absl::Duration) {
    ++started;
    running.Notify();
    while (!release) absl::SleepFor(absl::Milliseconds(1));
    ++finished;
  });
  running.WaitForNotification();
  prefetcher->Enqueue("b", [&](absl::Duration) { ++started; });
  prefetcher->Enqueue("c", [&](absl::Duration) { ++started; });
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(30));
    release = true;
  });
  prefetcher.reset();
  releaser.join();
  EXPECT_EQ(finished, 1) << "the running make ends before the destructor returns";
  EXPECT_EQ(started, 1) << "queued makes are dropped";
}

TEST(ReferencePrefetcherTest, AMakeStartsOnlyOnceNoCandidateIsInFlight) {
  absl::Notification made;
  std::atomic<bool> candidates_done{false};
  absl::Duration waited;
  ReferencePrefetcher prefetcher(/*max_queued=*/4);  // its thread uses the three above
  {
    ReferencePrefetcher::Busy first(prefetcher);
    auto second = std::make_unique<ReferencePrefetcher::Busy>(prefetcher);
    ASSERT_EQ(prefetcher.Enqueue("task\x1fv12",
                                 [&](absl::Duration idle_wait) {
                                   EXPECT_TRUE(candidates_done) << "made while a candidate ran";
                                   waited = idle_wait;
                                   made.Notify();
                                 }),
              Queued::kQueued);
    absl::SleepFor(absl::Milliseconds(50));
    second.reset();
    EXPECT_FALSE(made.WaitForNotificationWithTimeout(absl::Milliseconds(50)))
        << "one candidate is still in flight";
    EXPECT_EQ(prefetcher.pending(), 1);
    candidates_done = true;
  }
  ASSERT_TRUE(made.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_GE(waited, absl::Milliseconds(100)) << "the make reports how long it waited";
}

TEST(ReferencePrefetcherTest, ABoundOfZeroTurnsItOff) {
  ReferencePrefetcher prefetcher(0);
  bool ran = false;
  EXPECT_EQ(prefetcher.Enqueue("a", [&](absl::Duration) { ran = true; }), Queued::kOff);
  EXPECT_FALSE(ran);
  EXPECT_EQ(prefetcher.pending(), 0);
}

}  // namespace
}  // namespace kforge
