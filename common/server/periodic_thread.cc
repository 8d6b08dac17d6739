#include "common/server/periodic_thread.h"

#include <pthread.h>

namespace kforge {

PeriodicThread::PeriodicThread(std::string name, absl::Duration interval,
                               std::function<void()> tick)
    : thread_([this, name = std::move(name), interval, tick = std::move(tick)] {
        pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
        while (!stop_.WaitForNotificationWithTimeout(interval)) tick();
      }) {}

PeriodicThread::~PeriodicThread() {
  stop_.Notify();
  thread_.join();
}

}  // namespace kforge
