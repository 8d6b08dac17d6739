// A fixed set of named worker threads taking closures from a bounded queue.
// Submit blocks while `max_queued` closures wait (back-pressure on the
// producer: nothing submitted is dropped, and memory stays bounded). The
// destructor lets queued work finish, then joins the threads.
//
//   WorkPool pool("kf-verify", /*threads=*/4, /*max_queued=*/64);
//   pool.Submit([&] { ... });   // waits while 64 closures are queued
#ifndef KFORGE_COMMON_SERVER_WORK_POOL_H_
#define KFORGE_COMMON_SERVER_WORK_POOL_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace kforge {

class WorkPool {
 public:
  // `max_queued` below 1 counts as 1.
  WorkPool(const std::string& name, int threads, int max_queued);
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;
  ~WorkPool();

  // Queues `work`, first waiting while the queue is full. Not to be called
  // once the destructor has begun.
  void Submit(std::function<void()> work);
  // Closures waiting for a thread.
  size_t queued() const;
  size_t max_queued() const { return max_queued_; }

 private:
  void Loop();

  const size_t max_queued_;
  mutable absl::Mutex mu_;
  absl::CondVar ready_;  // work queued, or stopping
  absl::CondVar room_;   // a closure left the queue
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_SERVER_WORK_POOL_H_
