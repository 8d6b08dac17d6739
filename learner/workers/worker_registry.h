// Rollout workers known to the learner: registration, heartbeats, and expiry
// of workers that stop reporting. Thread-safe.
//
//   std::string id = registry.Register(request).worker_id();
//   if (!registry.Heartbeat(id, request)) { /* tell it to re-register */ }
//   registry.ExpireStale();   // from a periodic thread
#ifndef KFORGE_LEARNER_WORKERS_WORKER_REGISTRY_H_
#define KFORGE_LEARNER_WORKERS_WORKER_REGISTRY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kforge/v1/learner_service.pb.h"
#include "learner/learner_metrics.h"

namespace kforge {

class WorkerRegistry {
 public:
  struct WorkerInfo {
    std::string id;
    kforge::v1::RegisterWorkerRequest registration;
    absl::Time last_seen;
    int groups_in_flight = 0;
    int64_t weights_version = 0;
  };

  WorkerRegistry(absl::Duration timeout, LearnerMetrics* metrics)
      : timeout_(timeout), metrics_(metrics) {}

  // Registers (or re-registers, by worker_name) and returns the worker's id.
  std::string Register(const kforge::v1::RegisterWorkerRequest& request);
  // False when the id is unknown (expired, or the learner restarted).
  bool Heartbeat(const kforge::v1::HeartbeatRequest& request);
  // Removes workers silent for longer than the timeout; returns their ids.
  std::vector<std::string> ExpireStale();
  std::vector<WorkerInfo> Workers() const;

 private:
  const absl::Duration timeout_;
  LearnerMetrics* const metrics_;
  mutable absl::Mutex mu_;
  std::map<std::string, WorkerInfo> workers_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_WORKERS_WORKER_REGISTRY_H_
