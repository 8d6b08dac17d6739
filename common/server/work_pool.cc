#include "common/server/work_pool.h"

#include <pthread.h>

namespace kforge {

WorkPool::WorkPool(const std::string& name, int threads, int max_queued)
    : max_queued_(static_cast<size_t>(max_queued < 1 ? 1 : max_queued)) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, thread_name = (name + "-" + std::to_string(i)).substr(0, 15)] {
      pthread_setname_np(pthread_self(), thread_name.c_str());
      Loop();
    });
  }
}

WorkPool::~WorkPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    ready_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
}

void WorkPool::Submit(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  while (queue_.size() >= max_queued_ && !stopping_) room_.Wait(&mu_);
  queue_.push_back(std::move(work));
  ready_.Signal();
}

size_t WorkPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

void WorkPool::Loop() {
  for (;;) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      while (queue_.empty() && !stopping_) ready_.Wait(&mu_);
      if (queue_.empty()) return;  // stopping, and nothing left to do
      work = std::move(queue_.front());
      queue_.pop_front();
      room_.Signal();
    }
    work();
  }
}

}  // namespace kforge
