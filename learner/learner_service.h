// The gRPC shell of the internal LearnerService. Worker registration and
// heartbeats are served here; work hand-out, sample delivery, weight
// streaming and broadcast-group coordination arrive with the trainer
// (issue #5) and answer UNIMPLEMENTED until then.
#ifndef KFORGE_LEARNER_LEARNER_SERVICE_H_
#define KFORGE_LEARNER_LEARNER_SERVICE_H_

#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "learner/workers/worker_registry.h"

namespace kforge {

class LearnerServiceImpl final : public kforge::v1::LearnerService::Service {
 public:
  LearnerServiceImpl(WorkerRegistry* workers, const kforge::v1::LearnerConfig* config)
      : workers_(workers), config_(config) {}

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const kforge::v1::RegisterWorkerRequest* request,
                              kforge::v1::RegisterWorkerResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const kforge::v1::HeartbeatRequest* request,
                         kforge::v1::HeartbeatResponse* response) override;

 private:
  WorkerRegistry* const workers_;
  const kforge::v1::LearnerConfig* const config_;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_LEARNER_SERVICE_H_
