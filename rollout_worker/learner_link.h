// The rollout worker's standing connection to the learner: registers (with
// retries and back-off), then heartbeats on its own named thread,
// re-registering when the learner has forgotten it (a learner restart).
// `on_ready(true/false)` reports whether the worker is registered, which is
// what the worker's health reports.
//
//   LearnerLink link(config, [&](bool ready) { host->SetServing(ready); });
//   ...
//   // destructor stops the thread
#ifndef KFORGE_ROLLOUT_WORKER_LEARNER_LINK_H_
#define KFORGE_ROLLOUT_WORKER_LEARNER_LINK_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/logging/logger.h"
#include "common/security/channel_security.h"
#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/service_config.pb.h"

namespace kforge {

class LearnerLink {
 public:
  // nccl_capable: the worker takes part in the NCCL weight broadcast (told
  // to the learner at registration).
  LearnerLink(const kforge::v1::RolloutWorkerConfig& config, std::string self_address,
              bool nccl_capable, std::function<void(bool)> on_ready,
              const ChannelSecurity& security = {});
  LearnerLink(const LearnerLink&) = delete;
  LearnerLink& operator=(const LearnerLink&) = delete;
  ~LearnerLink();

  // Empty until registered.
  std::string worker_id() const;

 private:
  void Run();
  bool Register();
  // False when the worker must register again or the learner is unreachable.
  bool Heartbeat();

  const kforge::v1::RolloutWorkerConfig config_;
  const std::string self_address_;
  const bool nccl_capable_;
  const std::function<void(bool)> on_ready_;
  Logger log_{"rollout_worker"};
  std::unique_ptr<kforge::v1::LearnerService::Stub> stub_;
  absl::Notification stop_;
  mutable absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(5);
  std::thread thread_;
};

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_LEARNER_LINK_H_
