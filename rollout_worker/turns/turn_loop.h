// TurnLoop: the rollout worker's books for multi-turn trajectories (issue
// 24). Each trajectory is one sample of a group taken through several
// turns: after a turn's verdict the worker either ends the trajectory
// (TrajectoryEnds, the rule the learner applies too) or renders the next
// prompt, the task, the earlier answers and what the verifier said about
// each, and samples the next turn.
//
//   turns.Sampled(sample, item);  // before the sample goes to a verifier
//   std::optional<TurnLoop::FollowUp> next =
//       turns.Answered(response.request_id(), response.verdict());
//   if (next && next->item.ok()) engine->Submit(*std::move(next->item));  // the next turn
//
// CONTEXT. A follow-up prompt keeps the task's user message, every earlier
// answer without its reasoning (RenderFollowUpPrompt drops everything up to
// the last </think>) and the feedback on each (RenderTurnFeedback, at most
// MultiTurnSpec.feedback_max_chars, the verifier's secrets scrubbed). The
// reasoning is what grows fastest and what the next turn needs least. With
// a budget (Options), the prompt is kept within the sequence length less
// the item's max_new_tokens, so a revision gets its whole completion:
// earlier answers are left out oldest first, then earlier turns, never the
// last one (RenderBoundedFollowUpPrompt).
//
// WHO DECIDES. Where a trajectory ends is the learner's call: Answered
// follows the learner's SampleAck.next_turn when the verifier brought one
// back (the learner applies the end rule to the verdict it holds, which a
// re-verification can contradict), and the end rule on the worker's own
// verdict only when it did not (no learner behind the verifier, an older
// learner, a verdict the dispatcher gave itself). A trajectory of a group
// the learner has retired so ends at its next verdict, and its entry goes.
//
// A follow-up turn is a WorkItem of one sequence (group_size 1) carrying
// the turn and the trajectory's index; the engine stamps it with the policy
// version it holds when the turn starts, so the turns of one trajectory may
// come from different versions, each recorded on its own sample.
//
// Single-turn items (and evaluation items) are not tracked. Memory: one
// entry per open trajectory, holding the item (its prompt tokens left out)
// and the earlier answers and feedback; an entry goes when its trajectory
// ends or its group is dropped (DropGroup).
//
// Thread-safe: Sampled runs on the sampler thread, Answered on the
// dispatcher's threads, DropGroup on either. Answered holds the lock while
// it renders the next prompt, so a DropGroup can never slip between taking
// a trajectory and filing its next turn (which would revive a dropped one).
#ifndef KFORGE_ROLLOUT_WORKER_TURNS_TURN_LOOP_H_
#define KFORGE_ROLLOUT_WORKER_TURNS_TURN_LOOP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kforge/v1/learner_service.pb.h"
#include "kforge/v1/sample.pb.h"
#include "kforge/v1/verdict.pb.h"
#include "prompts/task_prompt.h"

namespace kforge {

class TurnLoop {
 public:
  struct Options {
    // Tokens of a rendered prompt (the sampler's tokenizer), and the
    // sampler's prompt + completion tokens per sequence (its max_len);
    // without either, follow-up prompts are not bounded.
    std::function<int64_t(const std::string&)> count_tokens;
    int64_t max_len = 0;
  };
  TurnLoop() = default;
  explicit TurnLoop(Options options) : options_(std::move(options)) {}

  // Records the completion of a multi-turn item's sample, whose verdict
  // Answered then takes. Single-turn and evaluation items are ignored.
  void Sampled(const v1::Sample& sample, const v1::WorkItem& item);
  struct FollowUp {
    std::string group_id;
    // The next turn's item, or INVALID_ARGUMENT when its prompt cannot be
    // rendered (the trajectory is then forgotten).
    absl::StatusOr<v1::WorkItem> item;
  };
  // The next turn to sample, or nullopt when the trajectory ended (or the
  // sample is not one of a tracked trajectory). `learner` is the learner's
  // SampleAck.next_turn for the sample (see WHO DECIDES); UNSPECIFIED
  // applies the end rule to `verdict`. The next prompt's feedback is
  // rendered from `verdict` either way.
  std::optional<FollowUp> Answered(
      const std::string& sample_id, const v1::Verdict& verdict,
      v1::SampleAck::NextTurn learner = v1::SampleAck::NEXT_TURN_UNSPECIFIED);
  // Forgets every trajectory of a group the worker gave up.
  void DropGroup(const std::string& group_id);
  size_t open_trajectories() const;

 private:
  struct Trajectory {
    v1::WorkItem item;  // the group's first-turn item, without prompt tokens
    int32_t index = 0;
    int32_t turn = 0;   // the turn awaiting its verdict
    std::string completion;  // that turn's answer
    std::vector<PastTurn> past;
  };

  // Whether trajectory `t`, whose turn t.turn got `verdict`, goes on.
  static bool GoesOn(const Trajectory& t, const v1::Verdict& verdict,
                     v1::SampleAck::NextTurn learner);
  absl::StatusOr<std::string> NextPrompt(const Trajectory& t) const;

  const Options options_;
  mutable absl::Mutex mu_;
  // By the sample id of the turn awaiting its verdict.
  absl::flat_hash_map<std::string, Trajectory> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_TURNS_TURN_LOOP_H_
