// WeightBroadcaster: the learner's side of the NCCL weight broadcast. The
// learner is rank 0 of an NCCL group whose other ranks are the rollout
// workers that long-poll LearnerService.SyncBroadcast (BroadcastMembership
// says which). After each update the trainer calls Broadcast: when the
// eligible workers differ from the group's members (one joined, died, was
// drained, or the group failed), the group re-forms under a new generation
// and NCCL id, which the members' open polls carry to them; then the new
// version is announced to the members' polls and the flat parameters go out
// in buckets (NcclCommunicator). Every wait has a deadline: a member that
// does not join within broadcast_form_timeout_s, or a broadcast not done
// within broadcast_timeout_s, aborts the communicator; the members become
// suspect (BroadcastMembership) and the group re-forms at the next update
// without those that never came back. Training never fails over it: the
// workers outside the group, and any that missed a version, fetch weights
// with GetWeights.
//
//   WeightBroadcaster broadcaster(config, &metrics);          // main
//   broadcaster.SetSource(flat.get());                        // trainer, a job starts
//   absl::Status sent = broadcaster.Broadcast(job_id, version);   // after each update
//   broadcaster.SetSource(nullptr);                           // before the job's model goes
//   broadcaster.Sync(request, wait, cancelled, &response);    // SyncBroadcast (gRPC threads)
//
// Threads: SetSource and Broadcast from the trainer thread (they own the
// communicator); Sync and Remove from any thread.
#ifndef KFORGE_LEARNER_WEIGHTS_WEIGHT_BROADCASTER_H_
#define KFORGE_LEARNER_WEIGHTS_WEIGHT_BROADCASTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/logging/logger.h"
#include "kforge/v1/learner_service.pb.h"
#include "kforge/v1/service_config.pb.h"
#include "learner/learner_metrics.h"
#include "learner/weights/broadcast_membership.h"

namespace kforge {

class FlatParameters;
class NcclCommunicator;

class WeightBroadcaster {
 public:
  WeightBroadcaster(const v1::LearnerConfig& config, LearnerMetrics* metrics);
  ~WeightBroadcaster();  // ends open polls
  WeightBroadcaster(const WeightBroadcaster&) = delete;
  WeightBroadcaster& operator=(const WeightBroadcaster&) = delete;

  // Why no worker can take part now ("" when they can): the broadcast is
  // off, the build has no NCCL, or the learner trains on the CPU.
  std::string NotMemberReason() const;

  // The running job's flat parameters (on the learner's GPU), or null when
  // no job runs. A new source (a new job) re-forms the group.
  void SetSource(FlatParameters* params);
  // Sends the source's parameters as `version` of `job_id` to the group,
  // re-forming it first when its membership changed. OK when there is no
  // member (or no source); otherwise errors say what failed, and the next
  // call re-forms.
  absl::Status Broadcast(const std::string& job_id, int64_t version);

  // One SyncBroadcast call: records the worker's poll and what it reports,
  // then waits up to `wait` (while `cancelled` stays false) for a group it
  // must join or a broadcast it must receive. INVALID_ARGUMENT for a
  // request without worker_id.
  absl::Status Sync(const v1::SyncBroadcastRequest& request, absl::Duration wait,
                    const std::function<bool()>& cancelled, v1::SyncBroadcastResponse* response);
  // The worker is gone (expired, drained): left out from the next group.
  void Remove(const std::string& worker_id);

  // The current group's generation and members (for tests and the log).
  int64_t generation() const;
  std::vector<std::string> members() const;

 private:
  // Trainer thread. Forms a group of `members` under a new generation.
  absl::Status Reform(const std::vector<std::string>& members);
  void EndGroup();
  // What a worker's open poll should be told now, if anything (under mu_).
  bool News(const v1::SyncBroadcastRequest& request, v1::SyncBroadcastResponse* response) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsMember(const std::string& worker_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const v1::LearnerConfig config_;
  LearnerMetrics* const metrics_;
  Logger log_{"learner"};

  // Trainer thread only.
  FlatParameters* source_ = nullptr;
  std::unique_ptr<NcclCommunicator> comm_;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // a group formed, a broadcast announced, or shutdown
  BroadcastMembership membership_ ABSL_GUARDED_BY(mu_);
  // The source's layout (empty: no source) and its GPU's UUID.
  std::string source_layout_ ABSL_GUARDED_BY(mu_);
  std::string source_device_ ABSL_GUARDED_BY(mu_);
  std::string source_reason_ ABSL_GUARDED_BY(mu_);   // why the source cannot be sent
  // Starts from the clock, so a restarted learner's generations differ from
  // the ones its workers still hold.
  int64_t generation_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> members_ ABSL_GUARDED_BY(mu_);  // of generation_, by rank - 1
  std::string unique_id_ ABSL_GUARDED_BY(mu_);
  bool forming_ ABSL_GUARDED_BY(mu_) = false;        // generation_'s members are joining
  bool needs_reform_ ABSL_GUARDED_BY(mu_) = false;   // a member left it, or the source changed
  // Members that said they failed to join generation_: not offered it again.
  absl::flat_hash_set<std::string> refused_ ABSL_GUARDED_BY(mu_);
  // Broadcasts of generation_ some member may not have received yet, in
  // order; every member receives each (NCCL pairs the calls by order).
  std::deque<v1::WeightBroadcast> announced_ ABSL_GUARDED_BY(mu_);
  int64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;  // of the last announced
  absl::flat_hash_map<std::string, int64_t> received_ ABSL_GUARDED_BY(mu_);  // by member
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_WEIGHTS_WEIGHT_BROADCASTER_H_
