// The gRPC shell of the internal LearnerService: worker registration and
// heartbeats, work hand-out (TakeWork) and scored-sample delivery
// (DeliverSamples) over the GroupTracker, and the newest policy weights as a
// chunk stream (GetWeights) from the WeightPublisher, and the coordination of
// the NCCL weight broadcast (SyncBroadcast) through the WeightBroadcaster.
// Every call first passes `guard` (mesh peers only; common/security/call_auth.h).
#ifndef KFORGE_LEARNER_LEARNER_SERVICE_H_
#define KFORGE_LEARNER_LEARNER_SERVICE_H_

#include "common/logging/logger.h"
#include "common/security/call_auth.h"
#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "learner/learner_metrics.h"
#include "learner/rollout/group_tracker.h"
#include "learner/weights/weight_broadcaster.h"
#include "learner/weights/weight_publisher.h"
#include "learner/workers/worker_registry.h"

namespace kforge {

class LearnerServiceImpl final : public kforge::v1::LearnerService::Service {
 public:
  LearnerServiceImpl(WorkerRegistry* workers, GroupTracker* groups, WeightPublisher* weights,
                     WeightBroadcaster* broadcaster, LearnerMetrics* metrics,
                     const kforge::v1::LearnerConfig* config, CallGuard guard = {})
      : workers_(workers),
        groups_(groups),
        weights_(weights),
        broadcaster_(broadcaster),
        metrics_(metrics),
        config_(config),
        guard_(std::move(guard)) {}

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const kforge::v1::RegisterWorkerRequest* request,
                              kforge::v1::RegisterWorkerResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context, const kforge::v1::HeartbeatRequest* request,
                         kforge::v1::HeartbeatResponse* response) override;
  grpc::Status TakeWork(grpc::ServerContext* context, const kforge::v1::TakeWorkRequest* request,
                        kforge::v1::TakeWorkResponse* response) override;
  grpc::Status DeliverSamples(grpc::ServerContext* context,
                              const kforge::v1::DeliverSamplesRequest* request,
                              kforge::v1::DeliverSamplesResponse* response) override;
  grpc::Status ReleaseWork(grpc::ServerContext* context,
                           const kforge::v1::ReleaseWorkRequest* request,
                           kforge::v1::ReleaseWorkResponse* response) override;
  grpc::Status GetWeights(grpc::ServerContext* context,
                          const kforge::v1::GetWeightsRequest* request,
                          grpc::ServerWriter<kforge::v1::WeightChunk>* writer) override;
  grpc::Status SyncBroadcast(grpc::ServerContext* context,
                             const kforge::v1::SyncBroadcastRequest* request,
                             kforge::v1::SyncBroadcastResponse* response) override;

 private:
  WorkerRegistry* const workers_;
  GroupTracker* const groups_;
  WeightPublisher* const weights_;
  WeightBroadcaster* const broadcaster_;
  LearnerMetrics* const metrics_;
  const kforge::v1::LearnerConfig* const config_;
  const CallGuard guard_;
  Logger log_{"learner"};

  // A long poll's wait: what the caller asks, within the configured bound
  // and ending before the caller's deadline.
  absl::Duration LongPollWait(const grpc::ServerContext& context, int64_t wait_ms) const;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_LEARNER_SERVICE_H_
