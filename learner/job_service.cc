#include "learner/job_service.h"

#include <algorithm>
#include <vector>

#include "common/grpc_status.h"

namespace kforge {
namespace {

grpc::Status RequireJobId(const std::string& job_id) {
  if (job_id.empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "job_id: is required"};
  return grpc::Status::OK;
}

// How long one wait for job events lasts before the stream checks whether
// its client is still there.
constexpr absl::Duration kWatchPollInterval = absl::Milliseconds(500);

}  // namespace

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* context, const kforge::v1::JobSpec* request,
                                       kforge::v1::Job* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  kforge::v1::JobSpec spec = *request;
  if (absl::Status checked = CheckJobSpec(check_context_, &spec); !checked.ok()) {
    metrics_->jobs_rejected.Increment();
    return ToGrpcStatus(checked);
  }
  absl::StatusOr<kforge::v1::Job> job = registry_->Submit(spec);
  if (!job.ok()) {
    metrics_->jobs_rejected.Increment();
    return ToGrpcStatus(job.status());
  }
  metrics_->jobs_submitted.Increment();
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext* context, const kforge::v1::GetJobRequest* request,
                                    kforge::v1::Job* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  if (grpc::Status s = RequireJobId(request->job_id()); !s.ok()) return s;
  absl::StatusOr<kforge::v1::Job> job = registry_->Get(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext* context,
                                      const kforge::v1::ListJobsRequest* request,
                                      kforge::v1::ListJobsResponse* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  if (request->limit() < 0) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "limit: must not be negative"};
  }
  const int limit = request->limit() == 0 ? config_->list_limit()
                                          : std::min(request->limit(), config_->list_limit());
  std::vector<kforge::v1::JobState> states;
  for (int state : request->states()) states.push_back(static_cast<kforge::v1::JobState>(state));
  for (kforge::v1::Job& job : registry_->List(states, limit)) {
    *response->add_jobs() = std::move(job);
  }
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* context,
                                       const kforge::v1::CancelJobRequest* request,
                                       kforge::v1::Job* response) {
  KF_AUTHORIZE(guard_.Check(*context));
  if (grpc::Status s = RequireJobId(request->job_id()); !s.ok()) return s;
  absl::StatusOr<kforge::v1::Job> job = registry_->Cancel(request->job_id(), request->reason());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* context,
                                      const kforge::v1::WatchJobRequest* request,
                                      grpc::ServerWriter<kforge::v1::JobEvent>* writer) {
  KF_AUTHORIZE(guard_.Check(*context));
  if (grpc::Status s = RequireJobId(request->job_id()); !s.ok()) return s;
  int64_t seq = 0;
  for (;;) {
    if (context->IsCancelled()) return {grpc::StatusCode::CANCELLED, "watcher went away"};
    absl::StatusOr<JobRegistry::EventBatch> batch =
        registry_->WaitForEvents(request->job_id(), seq, kWatchPollInterval, request->replay());
    if (!batch.ok()) return ToGrpcStatus(batch.status());
    for (const kforge::v1::JobEvent& event : batch->events) {
      if (!writer->Write(event)) return {grpc::StatusCode::CANCELLED, "watcher went away"};
    }
    seq = batch->last_seq;
    if (batch->job_ended) return grpc::Status::OK;
  }
}

}  // namespace kforge
