// BroadcastReceiver: the rollout worker's side of the NCCL weight broadcast
// (the learner's is learner/weights/weight_broadcaster.h). A "kf-weights-bc"
// thread long-polls LearnerService.SyncBroadcast with what the worker holds
// (its group generation, the last version received, its parameter layout,
// and any failure since the last call). It joins each group the learner
// makes it a member of, and when a broadcast starts it has the sampler
// thread receive it straight into the live parameters (FlatParameters)
// between two decode steps, then records the version with WeightSync.
//
// Every broadcast of the generation is received, in order (NCCL pairs the
// calls by order). Deadlines: a join or a receive waits as long as the
// learner does, counted from when the group or broadcast arrived (the
// timeout travels with it), plus broadcast_grace_s,
// then the communicator is aborted, the worker leaves the group and says so
// on its next call, and the learner re-forms the group. A receive that fails
// leaves the parameters a mix of two versions, so the same sampler-thread
// closure re-fetches the weights over gRPC before any further decode step
// (WeightSync::RefetchOnSampler).
//
//   auto receiver = BroadcastReceiver::Start(config, {.learner = stub, .params = flat,
//       .engine = engine, .sync = sync, .link = link, .metrics = metrics});
//   ...
//   receiver.reset();   // before the engine goes
#ifndef KFORGE_ROLLOUT_WORKER_WEIGHTS_BROADCAST_RECEIVER_H_
#define KFORGE_ROLLOUT_WORKER_WEIGHTS_BROADCAST_RECEIVER_H_

#include <cstdint>
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/logging/logger.h"
#include "kforge/v1/learner_service.grpc.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "rollout_worker/learner_link.h"
#include "rollout_worker/rollout_metrics.h"

namespace kforge {

class FlatParameters;
class NcclCommunicator;
class RolloutEngine;
class WeightSync;

class BroadcastReceiver {
 public:
  struct Deps {
    v1::LearnerService::Stub* learner = nullptr;
    FlatParameters* params = nullptr;  // the live model's, on its GPU
    RolloutEngine* engine = nullptr;
    WeightSync* sync = nullptr;
    const LearnerLink* link = nullptr;  // the worker id
    RolloutMetrics* metrics = nullptr;
  };
  // Everything in `deps` outlives the receiver.
  static std::unique_ptr<BroadcastReceiver> Start(const v1::RolloutWorkerConfig& config, Deps deps);
  // Stops polling and joins the thread; a receive queued on the sampler
  // thread still runs there (it holds what it needs).
  ~BroadcastReceiver();
  BroadcastReceiver(const BroadcastReceiver&) = delete;
  BroadcastReceiver& operator=(const BroadcastReceiver&) = delete;

 private:
  BroadcastReceiver(const v1::RolloutWorkerConfig& config, Deps deps);
  void Loop();
  void Join(const v1::BroadcastGroup& group);
  void Receive(const v1::WeightBroadcast& broadcast);
  // Leaves the group; a non-empty error is reported on the next call (a
  // failed join as such).
  void Leave(const std::string& error, bool join_failed = false);
  // Cancels the SyncBroadcast call in flight, if any (the destructor).
  void CancelCall();

  const v1::RolloutWorkerConfig config_;
  const Deps deps_;
  const std::string layout_;
  const std::string device_uuid_;
  Logger log_{"rollout_worker"};
  absl::Notification stop_;
  // Seen by a receive queued on the sampler thread after the receiver went.
  std::shared_ptr<std::atomic<bool>> stopping_ = std::make_shared<std::atomic<bool>>(false);
  absl::Mutex call_mu_;
  grpc::ClientContext* call_ ABSL_GUARDED_BY(call_mu_) = nullptr;
  // The receiver thread's own state.
  std::shared_ptr<NcclCommunicator> comm_;  // shared with a queued receive
  int64_t generation_ = 0;
  int64_t bucket_bytes_ = 0;
  int64_t received_sequence_ = 0;
  std::string error_;              // to report on the next call
  int64_t failed_generation_ = 0;  // the generation it happened in
  bool join_failed_ = false;
  std::thread thread_;
};

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_WEIGHTS_BROADCAST_RECEIVER_H_
