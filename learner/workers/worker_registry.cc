#include "learner/workers/worker_registry.h"

#include "absl/strings/str_cat.h"

namespace kforge {

std::string WorkerRegistry::Register(const kforge::v1::RegisterWorkerRequest& request) {
  absl::MutexLock lock(&mu_);
  // A restarted worker (same name) replaces its old registration.
  std::erase_if(workers_, [&](const auto& item) {
    return item.second.registration.worker_name() == request.worker_name();
  });
  WorkerInfo info;
  info.id = absl::StrCat("worker-", next_id_++, "-", request.worker_name());
  info.registration = request;
  info.last_seen = absl::Now();
  const std::string id = info.id;
  workers_[id] = std::move(info);
  metrics_->workers_registered.Set(static_cast<double>(workers_.size()));
  return id;
}

bool WorkerRegistry::Heartbeat(const kforge::v1::HeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(request.worker_id());
  if (it == workers_.end()) return false;
  it->second.last_seen = absl::Now();
  it->second.groups_in_flight = request.groups_in_flight();
  it->second.weights_version = request.weights_version();
  metrics_->worker_heartbeats.Increment();
  return true;
}

std::vector<std::string> WorkerRegistry::ExpireStale() {
  absl::MutexLock lock(&mu_);
  const absl::Time cutoff = absl::Now() - timeout_;
  std::vector<std::string> expired;
  std::erase_if(workers_, [&](const auto& item) {
    if (item.second.last_seen >= cutoff) return false;
    expired.push_back(item.first);
    return true;
  });
  metrics_->workers_expired.Increment(static_cast<double>(expired.size()));
  metrics_->workers_registered.Set(static_cast<double>(workers_.size()));
  return expired;
}

std::vector<WorkerRegistry::WorkerInfo> WorkerRegistry::Workers() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerInfo> out;
  for (const auto& [id, info] : workers_) out.push_back(info);
  return out;
}

}  // namespace kforge
