// The held-out evaluation round in flight: the groups offered at one step
// come back (some late, some never), and the round is summarised once all
// are back or when the next one opens. A group is counted only in the round
// that offered it: one that comes back after its round was summarised (a
// re-issued group, a slow worker) is refused, where it used to start a round
// of its own.
//
//   round.Open(step, tasks.size());
//   for (size_t i = 0; i < tasks.size(); ++i) Offer(EvalRound::GroupId(step, i, nonce));
//   ... if (!round.Take(std::move(group))) log("late"); if (round.complete()) Report(round.Close());
//
// Not thread-safe: the trainer's thread owns it.
#ifndef KFORGE_LEARNER_ROLLOUT_EVAL_ROUND_H_
#define KFORGE_LEARNER_ROLLOUT_EVAL_ROUND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "learner/rollout/group_tracker.h"

namespace kforge {

class EvalRound {
 public:
  struct Summary {
    int64_t step = -1;
    size_t offered = 0;
    std::vector<CompletedGroup> groups;
    // The policy versions that sampled the answers: a rollout worker samples
    // with the newest weights it has, at or after the round's step.
    int64_t min_policy_version = 0;
    int64_t max_policy_version = 0;
  };

  // The id of task `index`'s group in the round of `step`; the tracker
  // appends "~rN" to a re-issue.
  static std::string GroupId(int64_t step, size_t index, const std::string& nonce);

  void Open(int64_t step, size_t offered);
  bool open() const { return step_ >= 0; }
  int64_t step() const { return step_; }
  // Keeps `group` when it is of the open round; false otherwise (nothing
  // kept).
  bool Take(CompletedGroup group);
  bool complete() const { return open() && groups_.size() >= offered_; }
  // What came back; the round is over.
  Summary Close();

 private:
  int64_t step_ = -1;
  size_t offered_ = 0;
  std::vector<CompletedGroup> groups_;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_ROLLOUT_EVAL_ROUND_H_
