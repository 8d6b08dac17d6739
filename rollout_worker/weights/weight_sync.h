// WeightSync: keeps the rollout worker's model on the weights the learner's
// work asks for. Every WorkItem names its job and the least policy version
// it may be sampled with; before such an item is sampled, Ensure streams the
// learner's newest weights of that job (LearnerService.GetWeights, chunked),
// stages them whole, and has the sampler apply them between two decode steps
// (RolloutEngine::RunBetweenSteps), stamping later samples with the new
// version. Groups already running finish on the new weights; their samples
// keep the version they were admitted under, which the learner bounds.
//
//   WeightSync sync(learner_stub, policy->model.get(), engine.get(), config, metrics);
//   KF_RETURN_IF_ERROR(sync.Ensure(item.job_id(), item.min_policy_version(),
//                                  response.policy_version()));
//   engine->Submit(item);
//
// Threading: Ensure is called from one thread (the take-work loop).
#ifndef KFORGE_ROLLOUT_WORKER_WEIGHTS_WEIGHT_SYNC_H_
#define KFORGE_ROLLOUT_WORKER_WEIGHTS_WEIGHT_SYNC_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "common/logging/logger.h"
#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "rollout_worker/rollout_metrics.h"

namespace kforge {

class DecoderModel;
class RolloutEngine;

class WeightSync {
 public:
  // All pointers outlive the object. `stop` aborts a wait for the sampler.
  WeightSync(v1::LearnerService::Stub* learner, DecoderModel* model, RolloutEngine* engine,
             const v1::RolloutWorkerConfig& config, RolloutMetrics* metrics,
             const absl::Notification* stop);

  // OK once the engine samples with job_id's weights at a version between
  // min_version and learner_version (the learner's newest, from the same
  // TakeWork answer): a learner restarted from an older checkpoint is
  // behind the worker, whose newer weights must then be replaced too.
  // UNAVAILABLE / FAILED_PRECONDITION from the learner, and INVALID_ARGUMENT
  // naming the tensor when its weights do not fit this model.
  absl::Status Ensure(const std::string& job_id, int64_t min_version, int64_t learner_version);

  const std::string& job_id() const { return job_id_; }
  int64_t version() const { return version_; }

 private:
  absl::Status Fetch(const std::string& job_id);

  v1::LearnerService::Stub* const learner_;
  DecoderModel* const model_;
  RolloutEngine* const engine_;
  const v1::RolloutWorkerConfig config_;
  RolloutMetrics* const metrics_;
  const absl::Notification* const stop_;
  Logger log_{"rollout_worker"};
  std::string job_id_;   // whose weights the model holds; empty: the checkpoint's own
  int64_t version_ = -1;
};

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_WEIGHTS_WEIGHT_SYNC_H_
