#include "rollout_worker/weights/broadcast_receiver.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/client/backoff.h"
#include "common/client/rpc_client.h"
#include "common/grpc_status.h"
#include "model/weights/flat_parameters.h"
#include "model/weights/nccl_communicator.h"
#include "rollout_worker/sampler/rollout_engine.h"
#include "rollout_worker/weights/weight_sync.h"

namespace kforge {

std::unique_ptr<BroadcastReceiver> BroadcastReceiver::Start(const v1::RolloutWorkerConfig& config,
                                                            Deps deps) {
  auto receiver = std::unique_ptr<BroadcastReceiver>(new BroadcastReceiver(config, deps));
  BroadcastReceiver* r = receiver.get();
  r->thread_ = std::thread([r] {
    pthread_setname_np(pthread_self(), "kf-weights-bc");
    r->Loop();
  });
  return receiver;
}

BroadcastReceiver::BroadcastReceiver(const v1::RolloutWorkerConfig& config, Deps deps)
    : config_(config),
      deps_(deps),
      layout_(deps.params->Layout()),
      device_uuid_(NcclCommunicator::DeviceUuid(deps.params->device_index())) {}

BroadcastReceiver::~BroadcastReceiver() {
  stop_.Notify();
  stopping_->store(true);
  CancelCall();
  if (thread_.joinable()) thread_.join();
}

void BroadcastReceiver::CancelCall() {
  absl::MutexLock lock(&call_mu_);
  if (call_ != nullptr) call_->TryCancel();
}

void BroadcastReceiver::Loop() {
  const absl::Duration wait = absl::Seconds(config_.take_work_wait_s());
  Backoff backoff(config_.rpc());
  std::string said;  // the last reason logged for not taking part
  while (!stop_.HasBeenNotified()) {
    const std::string worker_id = deps_.link->worker_id();
    if (worker_id.empty()) {  // not registered yet
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(200));
      continue;
    }
    v1::SyncBroadcastRequest request;
    request.set_worker_id(worker_id);
    request.set_generation(generation_);
    request.set_received_sequence(received_sequence_);
    request.set_layout(layout_);
    request.set_device_uuid(device_uuid_);
    request.set_wait_ms(absl::ToInt64Milliseconds(wait));
    request.set_error(error_);
    request.set_failed_generation(failed_generation_);
    request.set_join_failed(join_failed_);
    v1::SyncBroadcastResponse response;
    grpc::ClientContext context;
    SetDeadline(context, wait + absl::Seconds(config_.rpc().deadline_s()));
    {
      absl::MutexLock lock(&call_mu_);
      if (stop_.HasBeenNotified()) break;
      call_ = &context;
    }
    const absl::Status called = FromGrpcStatus(deps_.learner->SyncBroadcast(&context, request, &response));
    {
      absl::MutexLock lock(&call_mu_);
      call_ = nullptr;
    }
    if (!called.ok()) {
      if (stop_.HasBeenNotified()) break;  // the destructor cancelled the call
      // The group is kept: a learner that is still there broadcasts to it
      // (one that restarted forms a new one, which replaces it).
      const std::string reason = absl::StrCat("SyncBroadcast: ", called.message());
      if (reason != said) log_.Warning("weight broadcast unreachable; weights come over gRPC",
                                       {{"error", reason}});
      said = reason;
      stop_.WaitForNotificationWithTimeout(backoff.Next());
      continue;
    }
    backoff.Reset();
    error_.clear();
    failed_generation_ = 0;
    join_failed_ = false;
    if (!response.not_member_reason().empty()) {
      if (response.not_member_reason() != said) {
        log_.Info("not in the weight-broadcast group; weights come over gRPC",
                  {{"reason", response.not_member_reason()}});
      }
      said = response.not_member_reason();
      Leave("");
      stop_.WaitForNotificationWithTimeout(wait);
      continue;
    }
    said.clear();
    if (response.has_group()) Join(response.group());
    if (response.has_broadcast()) Receive(response.broadcast());
  }
  Leave("");
}

void BroadcastReceiver::Leave(const std::string& error, bool join_failed) {
  if (comm_ == nullptr && generation_ == 0 && error.empty()) return;
  if (!error.empty()) {
    error_ = error;
    failed_generation_ = generation_;
    join_failed_ = join_failed;
  }
  comm_.reset();
  generation_ = 0;
  received_sequence_ = 0;
  if (!error.empty()) {
    deps_.metrics->broadcast_failures.Increment();
    log_.Warning("left the weight-broadcast group", {{"error", error}});
  }
  deps_.sync->SetBroadcastMember(false);
  deps_.metrics->broadcast_member.Set(0);
}

void BroadcastReceiver::Join(const v1::BroadcastGroup& group) {
  Leave("");
  const absl::Time started = absl::Now();
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> comm = NcclCommunicator::Join(
      group.nccl_unique_id(), group.rank(), group.world_size(), deps_.params->device_index(),
      absl::Milliseconds(group.timeout_ms()) + absl::Seconds(config_.broadcast_grace_s()),
      [this] { return stop_.HasBeenNotified(); });
  if (!comm.ok()) {
    if (stop_.HasBeenNotified()) return;
    generation_ = group.generation();  // the one the failure is reported for
    Leave(absl::StrCat("joining generation ", group.generation(), ": ", comm.status().message()),
          /*join_failed=*/true);
    return;
  }
  comm_ = *std::move(comm);
  generation_ = group.generation();
  bucket_bytes_ = group.bucket_bytes();
  deps_.sync->SetBroadcastMember(true);
  deps_.metrics->broadcast_member.Set(1);
  log_.Info("joined the weight-broadcast group",
            {{"generation", generation_}, {"rank", group.rank()}, {"world_size", group.world_size()},
             {"seconds", absl::ToDoubleSeconds(absl::Now() - started)}});
}

void BroadcastReceiver::Receive(const v1::WeightBroadcast& broadcast) {
  if (comm_ == nullptr || broadcast.generation() != generation_) return;
  // Kept alive by the sampler-thread closure: the receiver may stop before
  // it runs.
  auto received = std::make_shared<absl::Status>();
  const absl::Time started = absl::Now();
  // The learner gives up timeout_ms after it announced the broadcast: so
  // does the worker (plus its grace), however long the sampler took to
  // reach the closure.
  const absl::Time deadline = started + absl::Milliseconds(broadcast.timeout_ms()) +
                              absl::Seconds(config_.broadcast_grace_s());
  const bool ran = deps_.engine->RunBetweenStepsAndWait(
      [comm = comm_, received, broadcast, deadline, bucket_bytes = bucket_bytes_, deps = deps_,
       stopping = stopping_] {
        if (stopping->load()) {
          *received = absl::CancelledError("the worker is stopping");
          return;
        }
        const absl::Duration left = deadline - absl::Now();
        *received =
            left <= absl::ZeroDuration()
                ? absl::DeadlineExceededError("the sampler reached the broadcast after its deadline")
                : comm->Broadcast(*deps.params, /*root=*/0, bucket_bytes, left);
        if (received->ok()) {
          deps.engine->set_policy_version(broadcast.version());
          deps.sync->NoteApplied(broadcast.job_id(), broadcast.version());
        } else if (!absl::IsDeadlineExceeded(*received) || comm->broken()) {
          // Parts of the parameters may hold the new version, parts the old one.
          deps.sync->RefetchOnSampler(broadcast.job_id()).IgnoreError();
        }
      },
      stop_);
  if (!ran) return;
  if (!received->ok()) {
    if (stop_.HasBeenNotified()) return;
    Leave(absl::StrCat("receiving version ", broadcast.version(), " of job ", broadcast.job_id(),
                       " (generation ", generation_, "): ", received->message()));
    return;
  }
  received_sequence_ = broadcast.sequence();
  const absl::Duration took = absl::Now() - started;
  deps_.metrics->ObserveWeightUpdate(took, "nccl");
  log_.Info("weights applied",
            {{"job", broadcast.job_id()}, {"version", broadcast.version()}, {"path", "nccl"},
             {"seconds", absl::ToDoubleSeconds(took)},
             {"gb_per_s", static_cast<double>(deps_.params->bytes()) / 1e9 /
                              std::max(absl::ToDoubleSeconds(took), 1e-9)}});
}

}  // namespace kforge
