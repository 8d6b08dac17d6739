#include "rollout_worker/turns/turn_loop.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prompts/trajectory_end.h"
#include "prompts/turn_feedback.h"

namespace kforge {

void TurnLoop::Sampled(const v1::Sample& sample, const v1::WorkItem& item) {
  if (!IsMultiTurn(item.multi_turn()) || item.eval() || item.warm_up()) return;
  const v1::SampleKey& key = sample.key();
  absl::MutexLock lock(&mu_);
  if (key.turn() == 0) {
    Trajectory trajectory;
    trajectory.item = item;
    // The follow-ups render their own prompts; the first one's tokens
    // would only take room.
    trajectory.item.clear_prompt_tokens();
    trajectory.item.clear_prompt_text();
    trajectory.index = key.index_in_group();
    trajectory.completion = sample.completion_text();
    open_.insert_or_assign(key.sample_id(), std::move(trajectory));
    return;
  }
  // A follow-up: Answered filed its trajectory under this sample's id.
  if (auto it = open_.find(key.sample_id()); it != open_.end()) {
    it->second.completion = sample.completion_text();
  }
}

bool TurnLoop::GoesOn(const Trajectory& t, const v1::Verdict& verdict,
                      v1::SampleAck::NextTurn learner) {
  const v1::MultiTurnSpec& spec = t.item.multi_turn();
  // The turn limit holds whatever anyone says: the learner's books have no
  // room for a turn past it.
  if (t.turn + 1 >= spec.max_turns()) return false;
  switch (learner) {
    case v1::SampleAck::NEXT_TURN_WANTED: return true;
    case v1::SampleAck::NEXT_TURN_NOT_WANTED: return false;
    default: return !TrajectoryEnds(spec, verdict, t.turn);
  }
}

absl::StatusOr<std::string> TurnLoop::NextPrompt(const Trajectory& t) const {
  const v1::WorkItem& item = t.item;
  if (!options_.count_tokens || options_.max_len <= 0) {
    return RenderFollowUpPrompt(item.prompt(), item.task(), t.past);
  }
  // Room for the whole completion; a spec without max_new_tokens leaves the
  // sampler's default, and the budget only the context.
  const int64_t budget = options_.max_len - std::max<int64_t>(0, item.sampling().max_new_tokens());
  return RenderBoundedFollowUpPrompt(item.prompt(), item.task(), t.past, budget,
                                     options_.count_tokens);
}

std::optional<TurnLoop::FollowUp> TurnLoop::Answered(const std::string& sample_id,
                                                     const v1::Verdict& verdict,
                                                     v1::SampleAck::NextTurn learner) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(sample_id);
  if (it == open_.end()) return std::nullopt;
  Trajectory trajectory = std::move(it->second);
  open_.erase(it);
  if (!GoesOn(trajectory, verdict, learner)) return std::nullopt;
  const v1::MultiTurnSpec& spec = trajectory.item.multi_turn();
  trajectory.past.push_back(
      {std::move(trajectory.completion),
       RenderTurnFeedback(verdict, static_cast<size_t>(spec.feedback_max_chars()))});
  absl::StatusOr<std::string> prompt = NextPrompt(trajectory);
  if (!prompt.ok()) {
    return FollowUp{trajectory.item.group_id(),
                    absl::InvalidArgumentError(absl::StrCat("sample ", sample_id,
                                                            ": no follow-up prompt: ",
                                                            prompt.status().message()))};
  }
  ++trajectory.turn;
  v1::WorkItem next = trajectory.item;
  next.set_prompt_text(*std::move(prompt));
  next.set_group_size(1);
  next.set_turn(trajectory.turn);
  next.set_trajectory_index(trajectory.index);
  const std::string next_id = TurnSampleId(next.job_id(), next.group_id(), trajectory.index,
                                           trajectory.turn);
  std::string group_id = next.group_id();
  open_.insert_or_assign(next_id, std::move(trajectory));
  return FollowUp{std::move(group_id), std::move(next)};
}

void TurnLoop::DropGroup(const std::string& group_id) {
  absl::MutexLock lock(&mu_);
  for (auto it = open_.begin(); it != open_.end();) {
    if (it->second.item.group_id() == group_id) {
      open_.erase(it++);
    } else {
      ++it;
    }
  }
}

size_t TurnLoop::open_trajectories() const {
  absl::MutexLock lock(&mu_);
  return open_.size();
}

}  // namespace kforge
