// WeightSync: keeps the rollout worker's model on the weights the learner's
// work asks for. Every WorkItem names its job and the least policy version
// it may be sampled with. New weights come two ways, and both are applied on
// the sampler thread between two decode steps (RolloutEngine::RunBetweenSteps),
// stamping later samples with the new version:
//   - by NCCL broadcast into the live parameters (BroadcastReceiver), which
//     records what it applied here (NoteApplied);
//   - over gRPC: before an item is sampled, Ensure streams the learner's
//     newest weights of its job (LearnerService.GetWeights, chunked) and
//     stages them whole before applying them. A member of the broadcast group
//     first waits up to broadcast_wait_s for the broadcast to bring them.
// Groups already running finish on the new weights; their samples keep the
// version they were admitted under, which the learner bounds.
//
//   WeightSync sync(learner_stub, policy->model.get(), engine.get(), config, metrics, &stop);
//   KF_RETURN_IF_ERROR(sync.Ensure(item.job_id(), item.min_policy_version(),
//                                  response.policy_version()));
//   engine->Submit(item);
//
// Threading: Ensure from one thread (the take-work loop); NoteApplied and
// RefetchOnSampler from the sampler thread; SetBroadcastMember from any.
#ifndef KFORGE_ROLLOUT_WORKER_WEIGHTS_WEIGHT_SYNC_H_
#define KFORGE_ROLLOUT_WORKER_WEIGHTS_WEIGHT_SYNC_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/logging/logger.h"
#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "rollout_worker/rollout_metrics.h"

namespace kforge {

class DecoderModel;
class RolloutEngine;
class WeightAssembler;

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

  // Whether the worker is in a formed broadcast group (Ensure then waits for
  // the broadcast before it fetches).
  void SetBroadcastMember(bool member);
  // Sampler thread: a broadcast applied `version` of `job_id`.
  void NoteApplied(const std::string& job_id, int64_t version);
  // Sampler thread, inside RunBetweenSteps, after a failed broadcast receive
  // left the parameters a mix of two versions: fetches and applies job_id's
  // newest weights over gRPC before the sampler goes on. If that fails too,
  // every group in the engine is dropped (given back to the learner) and
  // the next Ensure fetches again.
  absl::Status RefetchOnSampler(const std::string& job_id);

  std::string job_id() const;
  int64_t version() const;

 private:
  // Streams job_id's newest weights (any thread), staged whole.
  absl::StatusOr<std::unique_ptr<WeightAssembler>> Download(const std::string& job_id);
  // Sampler thread: applies staged weights and records them.
  absl::Status Apply(WeightAssembler& assembler);
  absl::Status Fetch(const std::string& job_id, int64_t learner_version);
  // Whether the model already holds a newer version of job_id than staged
  // weights at `version` (and one the learner still has).
  bool Superseded(const std::string& job_id, int64_t version, int64_t learner_version) const;

  v1::LearnerService::Stub* const learner_;
  DecoderModel* const model_;
  RolloutEngine* const engine_;
  const v1::RolloutWorkerConfig config_;
  RolloutMetrics* const metrics_;
  const absl::Notification* const stop_;
  Logger log_{"rollout_worker"};

  mutable absl::Mutex mu_;
  std::string job_id_ ABSL_GUARDED_BY(mu_);   // whose weights the model holds; empty: the checkpoint's own
  int64_t version_ ABSL_GUARDED_BY(mu_) = -1;
  bool broadcast_member_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_WEIGHTS_WEIGHT_SYNC_H_
