// GroupTracker: the learner's books for the groups it hands to rollout
// workers and the scored samples verifiers bring back. It is what makes the
// sample flow exactly-once at the learner:
//
//   tracker.Offer(item);                                       // job driver
//   std::vector<v1::WorkItem> work = tracker.Take(worker, 4, absl::Seconds(5));  // TakeWork
//   KF_ASSIGN_OR_RETURN(v1::SampleAck ack, tracker.Deliver(scored));           // DeliverSamples
//   for (CompletedGroup& g : tracker.TakeCompleted()) Train(g);                // trainer
//   tracker.Expire(absl::Now());                                // periodically
//
// ACKS. Every delivered sample gets exactly one status: ACCEPTED the first
// time a valid, fresh sample of a live group arrives; DUPLICATE for a
// sample_id already accepted (a verifier's re-send; nothing changes);
// STALE when its policy version is more than max_staleness behind the
// current one (counted, unused); ORPHANED when its group is gone (timed out
// and re-issued or dropped, or never issued); REJECTED, with the reason,
// when it is malformed (ids that do not match its key, an index outside the
// group, log-probs that do not pair with the tokens, no verdict).
//
// TURNS. A multi-turn item (WorkItem.multi_turn.max_turns > 1) is G
// trajectories, each a run of turns 0, 1, ... that the rollout worker
// samples one after the other (ids "<job>/<group>/<index>/t<turn>" from
// turn 1 on). A trajectory is complete once it holds every turn from 0 up to
// one that TrajectoryEnds (prompts/trajectory_end.h) ends, the same rule the
// worker follows; turns may arrive in any order. A turn past the one that
// ended its trajectory is ORPHANED (one accepted before the earlier turn
// arrived is discarded then, counted). A group is complete when all its
// trajectories are; its samples come out index by index, each trajectory's
// turns in order. Single-turn items are trajectories of one turn each.
// Every ack says whether the learner wants the trajectory's next turn
// (SampleAck.next_turn), by this rule on the verdict the learner holds: a
// re-verified turn (a DUPLICATE whose verdict differs from the accepted
// one) is answered with the accepted verdict's decision, and the rollout
// worker follows it, so the two agree on where each trajectory ends.
//
// GROUPS. A group is complete when all its G samples are accepted; complete
// groups wait in order for TakeCompleted. A group not complete within the
// wait bound after it was issued, or whose worker is gone, or that
// received a stale sample, is re-issued under a new group id
// ("<id>~r<attempt>", so its samples have fresh ids and seeds) up to
// max_reissues times, then dropped; either way counted. The buffer of
// accepted samples is bounded: Deliver answers RESOURCE_EXHAUSTED (retry
// later, nothing recorded) while max_buffered_samples of complete groups
// wait for the trainer (samples of groups still filling always get in).
//
// WAIT BOUND. group_timeout is a ceiling. Once min_observed groups have
// completed, the bound follows the job's pace: wait_factor times the
// slowest issue-to-complete time of the last kPaceWindow groups, at least
// wait_floor. One lost sample (a verifier killed after it scored it, a
// delivery that found the learner restarting) so holds its group a few
// group times, not group_timeout. The pace bound only re-issues: a group
// whose attempts are spent is dropped at group_timeout, so an outage of a
// few group times (a verifier restarting) costs re-issues, not drops.
//
// SHARES. Workers long-polling Take when groups are offered share them:
// each takes at most its part of what is pending, split over the takers in
// Take at that moment (itself included), so one worker with room for a
// whole step does not take every group while the others stay idle. A
// worker alone in Take takes all it has room for.
//
// LEDGER. Every accepted sample ends in exactly one place: a group that
// completed (samples_completed), a group retired or dropped before it
// completed (samples_discarded), or a group still filling (samples_held).
// accepted == samples_completed + samples_discarded + samples_held at any
// snapshot; the chaos tests check it.
//
// Thread-safe.
#ifndef KFORGE_LEARNER_ROLLOUT_GROUP_TRACKER_H_
#define KFORGE_LEARNER_ROLLOUT_GROUP_TRACKER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kforge/v1/learner_service.pb.h"
#include "kforge/v1/sample.pb.h"

namespace kforge {

// Whether the trainer takes `item`'s samples into RL steps: not a held-out
// evaluation's, nor a verifier warm-up's (WorkItem.eval, warm_up). Those
// others are not bound by max_staleness and count in no step's supply.
inline bool IsTrainingGroup(const v1::WorkItem& item) { return !item.eval() && !item.warm_up(); }

struct CompletedGroup {
  v1::WorkItem item;
  // By index in the group; with turns, each trajectory's turns in order
  // (key.turn 0, 1, ... up to the one that ended it).
  std::vector<v1::ScoredSample> samples;
};

class GroupTracker {
 public:
  // Issue-to-complete times remembered for the pace bound.
  static constexpr size_t kPaceWindow = 32;
  struct Options {
    absl::Duration group_timeout = absl::Seconds(600);
    int32_t max_staleness = 1;
    int32_t max_reissues = 1;
    int64_t max_buffered_samples = 65536;
    // The pace bound (JobSpec.group_wait_*, whose defaults a job brings);
    // wait_factor 0 turns it off.
    double wait_factor = 0;
    absl::Duration wait_floor;
    int32_t min_observed = 1;
  };
  // A running job's bounds (JobSpec.group_timeout_s, max_staleness,
  // group_wait_*).
  struct JobBounds {
    absl::Duration group_timeout;
    int32_t max_staleness = 0;
    double wait_factor = 0;
    absl::Duration wait_floor;
    int32_t min_observed = 1;
  };
  struct Stats {
    uint64_t accepted = 0, duplicate = 0, stale = 0, orphaned = 0, rejected = 0;
    uint64_t groups_issued = 0, groups_completed = 0, groups_reissued = 0, groups_dropped = 0;
    // The ledger of accepted samples (see LEDGER).
    uint64_t samples_completed = 0, samples_discarded = 0;
    int64_t samples_held = 0;
    int64_t groups_pending = 0, groups_in_flight = 0, samples_buffered = 0;
    // Take calls in progress: rollout workers waiting for work.
    int64_t takers = 0;
    absl::Duration group_wait;  // the wait bound now
  };

  explicit GroupTracker(Options options) : options_(options) {}
  GroupTracker(const GroupTracker&) = delete;
  GroupTracker& operator=(const GroupTracker&) = delete;

  // Queues a group to sample. INVALID_ARGUMENT for missing ids, a group
  // size below 1, or a group id used before.
  absl::Status Offer(v1::WorkItem item);
  // Queues several at once (SHARES), all or none (the same errors, and a
  // group id twice among them).
  absl::Status Offer(std::vector<v1::WorkItem> items);
  // Up to max_groups pending groups, issued to `worker_id`, at most its
  // share (SHARES); waits up to `wait` for the first.
  std::vector<v1::WorkItem> Take(const std::string& worker_id, int32_t max_groups,
                                 absl::Duration wait);
  // One scored sample; RESOURCE_EXHAUSTED when the buffer is full.
  absl::StatusOr<v1::SampleAck> Deliver(const v1::ScoredSample& scored);
  // Re-issues or drops groups issued more than the wait bound before `now`.
  void Expire(absl::Time now);
  // The wait bound now: group_timeout, or the pace bound once enough groups
  // completed.
  absl::Duration GroupWait() const;
  // What the job waits for, oldest issue first, at most `limit` groups:
  // "group G on worker W for 12s: samples 1,3 of 4 missing; ...", or what
  // is not yet issued.
  std::string DescribeWaiting(const std::string& job_id, int limit = 4) const;
  // Re-issues or drops every group issued to a worker that is gone.
  void WorkerGone(const std::string& worker_id);
  // The worker gave the group up (it could not sample it): re-issued at
  // once (true) or dropped when its attempts are spent (false). NOT_FOUND
  // when the group is not live; FAILED_PRECONDITION when it is not issued
  // to `worker_id`.
  absl::StatusOr<bool> Release(const std::string& worker_id, const std::string& group_id,
                               const std::string& reason = "");
  // Why the last dropped group went: the reason its worker gave when it
  // released it, or that it timed out or lost its worker.
  std::string LastDropReason() const;
  // Completed groups, oldest first; frees their buffer space. Waits up to
  // `wait` for the first when there is none.
  std::vector<CompletedGroup> TakeCompleted(absl::Duration wait = absl::ZeroDuration());
  void SetPolicyVersion(int64_t version);
  // The running job's bounds; forgets the pace observed so far.
  void SetJobBounds(const JobBounds& bounds);
  // Training groups of `job_id` the trainer has not taken yet: pending, in
  // flight (re-issues count as their group) or complete and waiting for
  // TakeCompleted, counted in one pass under one lock, so a group that
  // completes meanwhile is counted exactly once: what the job driver counts
  // before it offers more (offer_window.h).
  struct UntakenCount {
    int64_t all = 0;
    // Of those, the ones offered at policy version `offered_from` or later
    // (WorkItem.min_policy_version): an older one can no longer serve the
    // step the driver offers for, however soon it completes.
    int64_t offered_from = 0;
    // Not counted above: the job's held-out and warm-up groups not taken
    // yet (0 once each came back or was dropped).
    int64_t rounds = 0;
  };
  UntakenCount UntakenGroups(const std::string& job_id, int64_t offered_from = 0) const;
  // Forgets every group of a job that ended (cancelled, failed): pending and
  // in-flight groups go, complete ones not yet taken too; later samples of
  // them are ORPHANED.
  void DropJob(const std::string& job_id);
  Stats stats() const;

 private:
  struct Group {
    v1::WorkItem item;
    std::string base_id;  // the id of its first attempt
    std::string worker_id;
    absl::Time issued = absl::InfinitePast();
    // By index, then turn; an empty key = not yet.
    std::vector<std::vector<v1::ScoredSample>> turns;
    // By index: the turn that ended the trajectory, -1 while it is open.
    std::vector<int32_t> ended_at;
    int32_t ended = 0;     // trajectories ended
    int32_t received = 0;  // turns accepted and held
  };

  v1::SampleAck Ack(const v1::ScoredSample& scored, v1::SampleAck::Status status,
                    std::string reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string CheckSample(const v1::ScoredSample& scored, const Group& group) const;
  // SampleAck.next_turn for turn `turn` of trajectory `index` of a group:
  // wanted while the group is live and the verdict held for that turn does
  // not end the trajectory (TrajectoryEnds).
  v1::SampleAck::NextTurn NextTurnFor(const std::string& group_id, int32_t index, int32_t turn) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends trajectory `index` if its turns from 0 now run up to one the end
  // rule ends, discarding any turn held past that one.
  void AdvanceTrajectory(Group& group, int32_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every held sample of `group`, for the ledger when it goes unfinished.
  void DiscardHeld(const Group& group, bool forget_ids) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the group out of flight and re-issues it as a new attempt, or
  // drops it when its attempts are spent.
  void Retire(const std::string& group_id, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Duration GroupWaitLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  Options options_ ABSL_GUARDED_BY(mu_);
  int64_t policy_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_drop_reason_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> pending_ ABSL_GUARDED_BY(mu_);
  int64_t takers_ ABSL_GUARDED_BY(mu_) = 0;  // Take calls in progress
  // Every live group (pending or issued), by its current id.
  absl::flat_hash_map<std::string, Group> groups_ ABSL_GUARDED_BY(mu_);
  // Sample ids accepted: of groups still held, waiting for the trainer, or
  // among the newest max_buffered_samples the trainer took (taken_ids_), so
  // a late re-send is answered DUPLICATE.
  absl::flat_hash_set<std::string> accepted_ids_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> taken_ids_ ABSL_GUARDED_BY(mu_);
  std::deque<CompletedGroup> completed_ ABSL_GUARDED_BY(mu_);
  int64_t buffered_ ABSL_GUARDED_BY(mu_) = 0;           // accepted, not yet taken
  int64_t completed_samples_ ABSL_GUARDED_BY(mu_) = 0;  // of those, in complete groups
  // Issue-to-complete times of the newest groups, for the pace bound.
  std::deque<absl::Duration> pace_ ABSL_GUARDED_BY(mu_);
  // Every group id offered or re-issued: a reused id would collide with the
  // sample ids remembered for duplicates.
  absl::flat_hash_set<std::string> used_group_ids_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_ROLLOUT_GROUP_TRACKER_H_
