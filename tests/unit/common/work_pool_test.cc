// WorkPool: a bounded queue that makes its producer wait instead of growing
// or dropping work.
#include "common/server/work_pool.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

namespace kforge {
namespace {

TEST(WorkPoolTest, AFullQueueMakesTheProducerWaitAndLosesNothing) {
  std::atomic<int> ran{0};
  absl::Notification release;
  absl::Notification submitted_all;
  {
    WorkPool pool("kf-test-pool", /*threads=*/1, /*max_queued=*/2);
    // One closure holds the only thread; two fill the queue.
    pool.Submit([&] {
      release.WaitForNotification();
      ++ran;
    });
    std::thread producer([&] {
      for (int i = 0; i < 4; ++i) pool.Submit([&] { ++ran; });
      submitted_all.Notify();
    });
    // The producer cannot get all four in while the thread is held: the
    // queue stops at its bound.
    while (pool.queued() < 2) std::this_thread::yield();
    EXPECT_FALSE(submitted_all.HasBeenNotified());
    EXPECT_EQ(pool.queued(), 2u);
    release.Notify();
    producer.join();
    EXPECT_TRUE(submitted_all.HasBeenNotified());
  }  // the destructor runs what is queued, then joins
  EXPECT_EQ(ran.load(), 5);
}

TEST(WorkPoolTest, ABoundBelowOneCountsAsOne) {
  WorkPool pool("kf-test-pool", 1, 0);
  EXPECT_EQ(pool.max_queued(), 1u);
}

}  // namespace
}  // namespace kforge
