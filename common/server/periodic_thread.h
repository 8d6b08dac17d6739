// A named background thread that runs `tick` every `interval` until the
// object is destroyed; the destructor stops and joins it.
//
//   PeriodicThread reaper("kf-worker-reaper", absl::Seconds(5),
//                         [&] { workers.ExpireStale(); });
#ifndef KFORGE_COMMON_SERVER_PERIODIC_THREAD_H_
#define KFORGE_COMMON_SERVER_PERIODIC_THREAD_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace kforge {

class PeriodicThread {
 public:
  // `name` is at most 15 characters (the kernel's limit for thread names).
  PeriodicThread(std::string name, absl::Duration interval, std::function<void()> tick);
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;
  ~PeriodicThread();

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace kforge

#endif  // KFORGE_COMMON_SERVER_PERIODIC_THREAD_H_
