#include "learner/learner_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"

namespace kforge {

grpc::Status LearnerServiceImpl::RegisterWorker(grpc::ServerContext* context,
                                                const kforge::v1::RegisterWorkerRequest* request,
                                                kforge::v1::RegisterWorkerResponse* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  if (request->worker_name().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "worker_name: is required"};
  }
  response->set_worker_id(workers_->Register(*request));
  response->set_heartbeat_interval_ms(
      static_cast<int64_t>(config_->heartbeat_interval_s() * 1000));
  response->set_policy_version(weights_->version());
  return grpc::Status::OK;
}

grpc::Status LearnerServiceImpl::Heartbeat(grpc::ServerContext* context,
                                           const kforge::v1::HeartbeatRequest* request,
                                           kforge::v1::HeartbeatResponse* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  if (request->worker_id().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "worker_id: is required"};
  }
  response->set_reregister(!workers_->Heartbeat(*request));
  response->set_policy_version(weights_->version());
  return grpc::Status::OK;
}

grpc::Status LearnerServiceImpl::TakeWork(grpc::ServerContext* context,
                                          const kforge::v1::TakeWorkRequest* request,
                                          kforge::v1::TakeWorkResponse* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  if (request->worker_id().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "worker_id: is required"};
  }
  if (request->max_groups() < 1) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("max_groups: ", request->max_groups(), " is below 1")};
  }
  const absl::Duration wait = LongPollWait(*context, request->wait_ms());
  for (kforge::v1::WorkItem& item : groups_->Take(request->worker_id(), request->max_groups(), wait)) {
    *response->add_items() = std::move(item);
  }
  response->set_policy_version(weights_->version());
  return grpc::Status::OK;
}

absl::Duration LearnerServiceImpl::LongPollWait(const grpc::ServerContext& context,
                                                int64_t wait_ms) const {
  absl::Duration wait = absl::Milliseconds(std::max<int64_t>(wait_ms, 0));
  wait = std::min(wait, absl::Seconds(config_->max_take_work_wait_s()));
  if (context.deadline() != std::chrono::system_clock::time_point::max()) {
    // Answer before the caller's deadline.
    const absl::Duration left = absl::FromChrono(context.deadline()) - absl::Now();
    wait = std::clamp(left - absl::Milliseconds(100), absl::ZeroDuration(), wait);
  }
  return wait;
}

grpc::Status LearnerServiceImpl::SyncBroadcast(grpc::ServerContext* context,
                                               const kforge::v1::SyncBroadcastRequest* request,
                                               kforge::v1::SyncBroadcastResponse* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  const absl::Status synced = broadcaster_->Sync(
      *request, LongPollWait(*context, request->wait_ms()),
      [context] { return context->IsCancelled(); }, response);
  return ToGrpcStatus(synced);
}

grpc::Status LearnerServiceImpl::ReleaseWork(grpc::ServerContext* context,
                                             const kforge::v1::ReleaseWorkRequest* request,
                                             kforge::v1::ReleaseWorkResponse* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  if (request->worker_id().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "worker_id: is required"};
  }
  if (request->group_id().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "group_id: is required"};
  }
  absl::StatusOr<bool> reissued = groups_->Release(request->worker_id(), request->group_id(), request->reason());
  if (!reissued.ok()) return ToGrpcStatus(reissued.status());
  response->set_reissued(*reissued);
  log_.Warning(*reissued ? "group released by its worker; re-issued"
                         : "group released by its worker; dropped, its attempts spent",
               {{"group", request->group_id()}, {"worker", request->worker_id()},
                {"reason", request->reason()}});
  return grpc::Status::OK;
}

grpc::Status LearnerServiceImpl::DeliverSamples(grpc::ServerContext* context,
                                                const kforge::v1::DeliverSamplesRequest* request,
                                                kforge::v1::DeliverSamplesResponse* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  for (const kforge::v1::ScoredSample& scored : request->samples()) {
    absl::StatusOr<kforge::v1::SampleAck> ack = groups_->Deliver(scored);
    if (!ack.ok()) {
      // Nothing of this sample was recorded; the sender retries the call and
      // the samples before it come back as DUPLICATE.
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(ack.status().message())};
    }
    metrics_->SampleAcks(ack->status()).Increment();
    if (ack->status() == kforge::v1::SampleAck::REJECTED) {
      log_.Warning("sample rejected", {{"sample", ack->sample_id()},
                                       {"sender", request->sender_id()},
                                       {"reason", ack->reason()}});
    }
    *response->add_acks() = *std::move(ack);
  }
  return grpc::Status::OK;
}

grpc::Status LearnerServiceImpl::GetWeights(grpc::ServerContext* context,
                                            const kforge::v1::GetWeightsRequest* request,
                                            grpc::ServerWriter<kforge::v1::WeightChunk>* writer) {
  KF_AUTHORIZE(guard_.Check(*context));
  std::shared_ptr<const WeightSnapshot> snapshot = weights_->Latest();
  if (snapshot == nullptr) {
    return {grpc::StatusCode::FAILED_PRECONDITION, "no policy weights: no job is training"};
  }
  if (!request->job_id().empty() && request->job_id() != snapshot->job_id()) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("job_id: ", request->job_id(), " is not training (", snapshot->job_id(),
                         " is)")};
  }
  if (request->version() != 0 && request->version() != snapshot->version()) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("version: ", request->version(), " is not kept; the newest is ",
                         snapshot->version())};
  }
  if (request->max_chunk_bytes() < 0) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "max_chunk_bytes: must not be negative"};
  }
  const int64_t chunk_bytes = request->max_chunk_bytes() == 0
                                  ? config_->weight_chunk_bytes()
                                  : std::min(request->max_chunk_bytes(), config_->weight_chunk_bytes());
  absl::StatusOr<std::unique_ptr<WeightChunker>> chunker =
      WeightChunker::Create(std::move(snapshot), chunk_bytes);
  if (!chunker.ok()) return ToGrpcStatus(chunker.status());
  kforge::v1::WeightChunk chunk;
  while ((*chunker)->Next(&chunk)) {
    if (context->IsCancelled() || !writer->Write(chunk)) {
      return {grpc::StatusCode::CANCELLED, "the client went away"};
    }
  }
  metrics_->weight_streams.Increment();
  return grpc::Status::OK;
}

}  // namespace kforge
