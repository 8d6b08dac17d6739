// The verifier warm-ups of a job's warm start (JobSpec.warm_up_verifiers):
// one group per training task, whose one candidate is the task's reference
// solution, verified on the first RL steps' batch while the warm start
// trains. Besides readying the verifiers, what comes back checks the corpus
// on this hardware, so it is summarised for the job's log once all are back,
// or at the job's end with what came back.
//
//   round.Open(task_ids, absl::Now());
//   ... if (!round.Take(group, absl::Now())) log("not of the round");
//       if (round.complete()) jobs->Log(id, round.Summary());
//   at the end: while (round.outstanding() && time is left) wait for groups;
//               if (round.outstanding()) jobs->Log(id, round.Summary());
//
// Not thread-safe: the trainer's thread owns it.
#ifndef KFORGE_LEARNER_ROLLOUT_WARM_UP_ROUND_H_
#define KFORGE_LEARNER_ROLLOUT_WARM_UP_ROUND_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "kforge/v1/verdict.pb.h"
#include "learner/rollout/group_tracker.h"

namespace kforge {

class WarmUpRound {
 public:
  // The id of the warm-up of training task `index`.
  static std::string GroupId(size_t index, const std::string& nonce);
  // Whether a warm-up's verdict accepts the reference solution: correct and
  // flagged by no check (a verdict can be correct, its outputs right, and
  // still fail a timing check).
  static bool Accepted(const v1::Verdict& verdict);
  // Where a verdict that does not accept stopped, and why, in a few words.
  static std::string WhyNotAccepted(const v1::Verdict& verdict);

  void Open(std::vector<std::string> task_ids, absl::Time now);
  // Keeps the verdict of a warm-up `group` whose task is out; false for one
  // of another task or already back (nothing kept).
  bool Take(const CompletedGroup& group, absl::Time now);
  bool complete() const { return !task_ids_.empty() && back_.size() == task_ids_.size(); }
  // Warm-ups of the round not back yet (0 before it opened).
  size_t not_back() const { return task_ids_.size() - back_.size(); }
  bool outstanding() const { return not_back() > 0; }
  // "verifier warm-up: 7 of 8 training tasks' reference solutions verified
  // correct (speedup over eager 0.61-1.34x, median 1.02x); all back 23.4 s
  // after they went out; not correct: level1/19_ReLU (STAGE_TIMING: ...)".
  std::string Summary() const;

 private:
  struct Back {
    v1::Verdict verdict;
    absl::Duration after;  // since the round opened
  };
  std::vector<std::string> task_ids_;  // in offered order
  absl::flat_hash_map<std::string, Back> back_;
  absl::Time opened_;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_ROLLOUT_WARM_UP_ROUND_H_
