#include "learner/learner_service.h"

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

}  // namespace kforge
