#include "learner/learner_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kforge {

grpc::Status LearnerServiceImpl::RegisterWorker(grpc::ServerContext*,
                                                const kforge::v1::RegisterWorkerRequest* request,
                                                kforge::v1::RegisterWorkerResponse* response) {
  if (request->worker_name().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "worker_name: is required"};
  }
  response->set_worker_id(workers_->Register(*request));
  response->set_heartbeat_interval_ms(
      static_cast<int64_t>(config_->heartbeat_interval_s() * 1000));
  return grpc::Status::OK;
}

grpc::Status LearnerServiceImpl::Heartbeat(grpc::ServerContext*,
                                           const kforge::v1::HeartbeatRequest* request,
                                           kforge::v1::HeartbeatResponse* response) {
  if (request->worker_id().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "worker_id: is required"};
  }
  response->set_reregister(!workers_->Heartbeat(*request));
  return grpc::Status::OK;
}

grpc::Status LearnerServiceImpl::TakeWork(grpc::ServerContext* context,
                                          const kforge::v1::TakeWorkRequest* request,
                                          kforge::v1::TakeWorkResponse* response) {
  if (request->worker_id().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "worker_id: is required"};
  }
  if (request->max_groups() < 1) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("max_groups: ", request->max_groups(), " is below 1")};
  }
  // The long poll ends before the caller's deadline, and within the
  // configured bound whatever the caller asks.
  absl::Duration wait = absl::Milliseconds(std::max<int64_t>(request->wait_ms(), 0));
  wait = std::min(wait, absl::Seconds(config_->max_take_work_wait_s()));
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    const absl::Duration left = absl::FromChrono(context->deadline()) - absl::Now();
    wait = std::clamp(left - absl::Milliseconds(100), absl::ZeroDuration(), wait);
  }
  for (kforge::v1::WorkItem& item : groups_->Take(request->worker_id(), request->max_groups(), wait)) {
    *response->add_items() = std::move(item);
  }
  return grpc::Status::OK;
}

grpc::Status LearnerServiceImpl::DeliverSamples(grpc::ServerContext*,
                                                const kforge::v1::DeliverSamplesRequest* request,
                                                kforge::v1::DeliverSamplesResponse* response) {
  for (const kforge::v1::ScoredSample& scored : request->samples()) {
    absl::StatusOr<kforge::v1::SampleAck> ack = groups_->Deliver(scored);
    if (!ack.ok()) {
      // Nothing of this sample was recorded; the sender retries the call and
      // the samples before it come back as DUPLICATE.
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(ack.status().message())};
    }
    metrics_->SampleAcks(ack->status()).Increment();
    *response->add_acks() = *std::move(ack);
  }
  return grpc::Status::OK;
}

}  // namespace kforge
