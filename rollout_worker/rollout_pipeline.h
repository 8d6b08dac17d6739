// RolloutPipeline: the rollout worker's work flow. A "kf-take-work" thread
// long-polls the learner's TakeWork while fewer than max_concurrent_groups
// groups are in flight, the RolloutEngine samples them, and every finished
// sample goes at once to a verifier through the VerifierDispatcher (with
// deliver_to_learner set, so the verdict reaches the learner from there). A
// "kf-rollout-mtr" thread copies the engine's and dispatcher's tallies into
// the metrics every second.
//
// Back-pressure: the dispatcher blocks the sampler thread when
// max_unacked_samples samples await verdicts, so slow verifiers slow
// sampling, and a full engine stops taking work.
//
// Before an item is sampled, WeightSync brings the model to the job's
// weights at the item's min_policy_version: by NCCL broadcast where the
// worker takes part in it (BroadcastReceiver, into the live parameters,
// which are re-homed into flat buffers first), streamed from the learner
// otherwise.
//
// A group the worker cannot sample (its weights would not load, the engine
// refused the item, sampling failed, a sample could not be handed to the
// dispatcher) is given back with ReleaseWork, so the
// learner re-issues it at once instead of after the job's group timeout;
// releases the learner could not take yet are sent again before the next
// TakeWork.
//
// MULTI-TURN. For a multi-turn item (WorkItem.multi_turn) the worker owns
// each trajectory's turns (TurnLoop): a verdict either ends the trajectory
// or becomes the next turn's prompt, submitted to the engine from the
// dispatcher's thread that brought the verdict (Submit only queues, so the
// dispatcher is never held up). The next turn runs under whatever weights
// the engine holds then. A turn the engine drops gives its group back like
// any other group.
//
// WARM-UPS. A verifier warm-up item (WorkItem.warm_up) is not sampled: its
// one candidate, the completion the learner put in it, goes to a verifier
// like a sampled one (its batch_id included), and the verdict reaches the
// learner the same way. It needs no weights.
//
// A learner without work answers the long poll empty; one too old to hand
// out work (TakeWork UNIMPLEMENTED) is said once in the log and polled at
// the back-off ceiling.
#ifndef KFORGE_ROLLOUT_WORKER_ROLLOUT_PIPELINE_H_
#define KFORGE_ROLLOUT_WORKER_ROLLOUT_PIPELINE_H_

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/logging/logger.h"
#include "common/server/periodic_thread.h"
#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "rollout_worker/dispatch/verifier_dispatcher.h"
#include "common/client/learner_delivery.h"
#include "common/server/work_pool.h"
#include "rollout_worker/learner_link.h"
#include "rollout_worker/rollout_metrics.h"
#include "model/policy_loader.h"
#include "rollout_worker/sampler/rollout_engine.h"
#include "rollout_worker/turns/turn_loop.h"
#include "model/weights/flat_parameters.h"
#include "rollout_worker/weights/broadcast_receiver.h"
#include "rollout_worker/weights/weight_sync.h"

namespace kforge {

class RolloutPipeline {
 public:
  // `policy`, `link` and `metrics` outlive the pipeline. `security`: how
  // the learner and the verifiers are reached.
  static absl::StatusOr<std::unique_ptr<RolloutPipeline>> Create(
      const v1::RolloutWorkerConfig& config, LoadedPolicy* policy, const LearnerLink* link,
      RolloutMetrics* metrics, const ChannelSecurity& security = {});
  // Whether a worker so configured receives weights by NCCL broadcast: the
  // broadcast on, a GPU device, NCCL in the build.
  static bool TakesPartInBroadcast(const v1::RolloutWorkerConfig& config);
  // Stops taking work, then the engine (dropping what it held), then the
  // dispatcher.
  ~RolloutPipeline();
  RolloutPipeline(const RolloutPipeline&) = delete;
  RolloutPipeline& operator=(const RolloutPipeline&) = delete;

 private:
  RolloutPipeline(const v1::RolloutWorkerConfig& config, const LoadedPolicy& policy,
                  const LearnerLink* link, RolloutMetrics* metrics,
                  const ChannelSecurity& security);
  void TakeWorkLoop();
  // Queues a group to give back (any thread), and forgets its trajectories
  // (the worker samples no more turns of it); SendReleases (the take-work
  // thread) tells the learner.
  void Release(const std::string& group_id, absl::string_view reason);
  void SendReleases(const std::string& worker_id);
  void OnSample(v1::Sample sample, const v1::WorkItem& item, absl::Duration ttft);
  // Sends `sample` of `item` to a verifier, which delivers it to the learner
  // with its verdict; a sample that cannot be dispatched releases its group.
  void Verify(v1::Sample sample, const v1::WorkItem& item);
  // The one candidate of a warm-up item (see WARM-UPS), on the take-work
  // thread.
  void VerifyWarmUp(const v1::WorkItem& item);
  // Each verdict (a dispatcher thread): the next turn of a multi-turn
  // trajectory, if it goes on.
  void OnVerdict(const v1::VerifyResponse& response);
  // A sample no verifier took (refused, or unanswered after every attempt):
  // delivered to the learner here, with the dispatcher's verdict, so its
  // group completes now instead of waiting out group_timeout_s.
  void DeliverLocally(const v1::VerifyRequest& request, const v1::VerifyResponse& response);

  const v1::RolloutWorkerConfig config_;
  const LearnerLink* const link_;
  RolloutMetrics* const metrics_;
  Logger log_{"rollout_worker"};
  std::unique_ptr<v1::LearnerService::Stub> learner_;
  LearnerDelivery local_delivery_;
  // One thread ("kf-local-deliver"): deliveries retry with back-off and must
  // not hold up the dispatcher's threads. Declared after what it uses.
  std::unique_ptr<WorkPool> local_deliveries_;
  std::unique_ptr<VerifierDispatcher> dispatcher_;
  std::unique_ptr<RolloutEngine> engine_;
  std::unique_ptr<FlatParameters> flat_;     // with the NCCL broadcast only
  std::unique_ptr<WeightSync> weight_sync_;  // take-work thread
  std::unique_ptr<BroadcastReceiver> broadcast_receiver_;
  std::unique_ptr<PeriodicThread> metrics_thread_;
  absl::Notification stop_;
  TurnLoop turns_;  // follow-up prompts bounded by the engine's max_len
  // Follow-up turns reach the engine under this lock, and not once the
  // destructor has closed it: verdicts may still arrive while the engine
  // goes away.
  absl::Mutex follow_up_mu_;
  bool follow_ups_open_ ABSL_GUARDED_BY(follow_up_mu_) = true;
  absl::Mutex release_mu_;
  // (group id, reason), oldest first.
  std::vector<std::pair<std::string, std::string>> releases_ ABSL_GUARDED_BY(release_mu_);
  std::thread take_work_thread_;
};

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_ROLLOUT_PIPELINE_H_
