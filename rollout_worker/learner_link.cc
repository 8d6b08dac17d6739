#include "rollout_worker/learner_link.h"

#include <pthread.h>

#include "common/client/rpc_client.h"

namespace kforge {

LearnerLink::LearnerLink(const kforge::v1::RolloutWorkerConfig& config, std::string self_address,
                         bool nccl_capable, std::function<void(bool)> on_ready,
                         const ChannelSecurity& security)
    : config_(config),
      self_address_(std::move(self_address)),
      nccl_capable_(nccl_capable),
      on_ready_(std::move(on_ready)),
      stub_(kforge::v1::LearnerService::NewStub(security.Connect(config.learner_address()))),
      thread_([this] {
        pthread_setname_np(pthread_self(), "kf-learner-link");
        Run();
      }) {}

LearnerLink::~LearnerLink() {
  stop_.Notify();
  thread_.join();
}

std::string LearnerLink::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

bool LearnerLink::Register() {
  kforge::v1::RegisterWorkerRequest request;
  request.set_worker_name(config_.worker_name());
  request.set_address(self_address_);
  request.set_device(config_.device());
  request.set_nccl_capable(nccl_capable_);
  request.set_max_concurrent_groups(config_.max_concurrent_groups());
  kforge::v1::RegisterWorkerResponse response;
  const grpc::Status status = CallWithRetry(config_.rpc(), [&](grpc::ClientContext& context) {
    return stub_->RegisterWorker(&context, request, &response);
  });
  if (!status.ok()) {
    log_.Warning("cannot register with the learner",
                 {{"learner", config_.learner_address()}, {"error", status.error_message()}});
    return false;
  }
  absl::MutexLock lock(&mu_);
  worker_id_ = response.worker_id();
  heartbeat_interval_ = absl::Milliseconds(response.heartbeat_interval_ms());
  log_.Info("registered", {{"worker_id", worker_id_}, {"learner", config_.learner_address()}});
  return true;
}

bool LearnerLink::Heartbeat() {
  kforge::v1::HeartbeatRequest request;
  request.set_worker_id(worker_id());
  kforge::v1::HeartbeatResponse response;
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(config_.rpc().deadline_s()));
  const grpc::Status status = stub_->Heartbeat(&context, request, &response);
  if (!status.ok()) {
    log_.Warning("heartbeat failed", {{"error", status.error_message()}});
    return false;
  }
  if (response.reregister()) log_.Warning("learner forgot this worker; registering again");
  return !response.reregister();
}

void LearnerLink::Run() {
  bool registered = false;
  absl::Duration retry = absl::Seconds(config_.rpc().backoff_initial_s());
  while (!stop_.HasBeenNotified()) {
    const bool was_registered = registered;
    registered = registered ? Heartbeat() : Register();
    if (registered != was_registered) on_ready_(registered);
    absl::Duration wait;
    {
      absl::MutexLock lock(&mu_);
      wait = registered ? heartbeat_interval_ : retry;
    }
    if (stop_.WaitForNotificationWithTimeout(wait)) break;
  }
}

}  // namespace kforge
