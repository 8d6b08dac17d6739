// The gRPC shell of JobService: turns requests into JobRegistry calls and
// library errors into gRPC status codes. Knows nothing of training. Every
// call first passes `guard` (a user's bearer token; common/security/call_auth.h).
#ifndef KFORGE_LEARNER_JOB_SERVICE_H_
#define KFORGE_LEARNER_JOB_SERVICE_H_

#include "common/security/call_auth.h"
#include "kforge/v1/job_service.grpc.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "learner/jobs/job_registry.h"
#include "learner/jobs/job_spec_check.h"
#include "learner/learner_metrics.h"

namespace kforge {

class JobServiceImpl final : public kforge::v1::JobService::Service {
 public:
  // Not owned; all must outlive the service.
  JobServiceImpl(JobRegistry* registry, LearnerMetrics* metrics, JobSpecCheckContext check_context,
                 const kforge::v1::LearnerConfig* config, CallGuard guard = {})
      : registry_(registry), metrics_(metrics), check_context_(std::move(check_context)),
        config_(config), guard_(std::move(guard)) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const kforge::v1::JobSpec* request,
                         kforge::v1::Job* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const kforge::v1::GetJobRequest* request,
                      kforge::v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const kforge::v1::ListJobsRequest* request,
                        kforge::v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const kforge::v1::CancelJobRequest* request,
                         kforge::v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const kforge::v1::WatchJobRequest* request,
                        grpc::ServerWriter<kforge::v1::JobEvent>* writer) override;

 private:
  JobRegistry* const registry_;
  LearnerMetrics* const metrics_;
  const JobSpecCheckContext check_context_;
  const kforge::v1::LearnerConfig* const config_;
  const CallGuard guard_;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_JOB_SERVICE_H_
