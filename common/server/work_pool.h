// A fixed set of named worker threads taking closures from a queue. The
// destructor lets queued work finish, then joins the threads.
//
//   WorkPool pool("kf-verify", 4);
//   pool.Submit([&] { ... });
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
  WorkPool(const std::string& name, int threads);
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;
  ~WorkPool();

  void Submit(std::function<void()> work);
  // Closures waiting for a thread.
  size_t queued() const;

 private:
  void Loop();

  mutable absl::Mutex mu_;
  absl::CondVar ready_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_SERVER_WORK_POOL_H_
