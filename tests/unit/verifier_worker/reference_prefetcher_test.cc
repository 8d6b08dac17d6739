// ReferencePrefetcher: work made ahead runs on its own thread, each key once
// while it is queued or running, never more than the bound outstanding;
// Enqueue never waits; what has not started when it is destroyed is dropped.
#include "verifier_worker/funnel/reference_prefetcher.h"

#include <gtest/gtest.h>

#include <atomic>
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
    ASSERT_EQ(prefetcher.Enqueue("task\x1fv12", [&] {
                worker = std::this_thread::get_id();
                running.Notify();
                release.WaitForNotification();
                ++ran;
              }),
              Queued::kQueued);
    running.WaitForNotification();
    EXPECT_EQ(prefetcher.Enqueue("task\x1fv12", [&] { ++ran; }), Queued::kDuplicate)
        << "running: the same epoch is not made twice";
    EXPECT_EQ(prefetcher.Enqueue("other\x1fv12", [&] { ++ran; }), Queued::kQueued);
    EXPECT_EQ(prefetcher.Enqueue("third\x1fv12", [&] { ++ran; }), Queued::kFull);
    EXPECT_EQ(prefetcher.pending(), 2);
    release.Notify();
    for (int i = 0; i < 500 && prefetcher.pending() > 0; ++i) absl::SleepFor(absl::Milliseconds(2));
    EXPECT_EQ(prefetcher.pending(), 0);
    EXPECT_EQ(ran, 2);
    // Done: the key can be queued again.
    EXPECT_EQ(prefetcher.Enqueue("task\x1fv12", [&] { ++ran; }), Queued::kQueued);
  }
  EXPECT_NE(worker, caller) << "made on the prefetcher's thread";
}

TEST(ReferencePrefetcherTest, DestroyingItWaitsForTheRunningMakeAndDropsTheQueuedOnes) {
  absl::Notification running;
  std::atomic<bool> release{false};
  std::atomic<int> finished{0}, started{0};
  auto prefetcher = std::make_unique<ReferencePrefetcher>(/*max_queued=*/4);
  prefetcher->Enqueue("a", [&] {
    ++started;
    running.Notify();
    while (!release) absl::SleepFor(absl::Milliseconds(1));
    ++finished;
  });
  running.WaitForNotification();
  prefetcher->Enqueue("b", [&] { ++started; });
  prefetcher->Enqueue("c", [&] { ++started; });
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(30));
    release = true;
  });
  prefetcher.reset();
  releaser.join();
  EXPECT_EQ(finished, 1) << "the running make ends before the destructor returns";
  EXPECT_EQ(started, 1) << "queued makes are dropped";
}

TEST(ReferencePrefetcherTest, ABoundOfZeroTurnsItOff) {
  ReferencePrefetcher prefetcher(0);
  bool ran = false;
  EXPECT_EQ(prefetcher.Enqueue("a", [&] { ran = true; }), Queued::kOff);
  EXPECT_FALSE(ran);
  EXPECT_EQ(prefetcher.pending(), 0);
}

}  // namespace
}  // namespace kforge
