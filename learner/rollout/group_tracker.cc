#include "learner/rollout/group_tracker.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "prompts/trajectory_end.h"

namespace kforge {
namespace {

// Turns per trajectory: 1 for a single-turn item (multi_turn unset).
int32_t MaxTurns(const v1::WorkItem& item) { return std::max(1, item.multi_turn().max_turns()); }

}  // namespace

absl::Status GroupTracker::Offer(v1::WorkItem item) {
  std::vector<v1::WorkItem> items;
  items.push_back(std::move(item));
  return Offer(std::move(items));
}

absl::Status GroupTracker::Offer(std::vector<v1::WorkItem> items) {
  absl::flat_hash_set<std::string> ids;
  for (const v1::WorkItem& item : items) {
    if (item.job_id().empty() || item.group_id().empty()) {
      return absl::InvalidArgumentError("work item: job_id and group_id are required");
    }
    if (item.group_size() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("work item ", item.group_id(), ": group_size ", item.group_size(), " < 1"));
    }
    if (!ids.insert(item.group_id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("work item ", item.group_id(), ": group id offered twice"));
    }
  }
  // All at once, under one lock: workers waiting in Take see every group
  // and share them (SHARES), rather than the first woken taking the first.
  absl::MutexLock lock(&mu_);
  for (const std::string& id : ids) {
    if (used_group_ids_.contains(id)) {
      return absl::InvalidArgumentError(absl::StrCat("work item ", id, ": group id already used"));
    }
  }
  for (v1::WorkItem& item : items) {
    const std::string id = item.group_id();
    used_group_ids_.insert(id);
    Group group;
    group.base_id = id;
    group.turns.assign(static_cast<size_t>(item.group_size()),
                       std::vector<v1::ScoredSample>(static_cast<size_t>(MaxTurns(item))));
    group.ended_at.assign(static_cast<size_t>(item.group_size()), -1);
    group.item = std::move(item);
    groups_.emplace(id, std::move(group));
    pending_.push_back(id);
  }
  return absl::OkStatus();
}

std::vector<v1::WorkItem> GroupTracker::Take(const std::string& worker_id, int32_t max_groups,
                                             absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  ++takers_;
  auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !pending_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&has_work), wait);
  // This caller's share of what is pending, the takers still in Take (it
  // among them) woken by the same offer taking theirs after it.
  const int64_t share =
      (static_cast<int64_t>(pending_.size()) + takers_ - 1) / std::max<int64_t>(1, takers_);
  --takers_;
  const int64_t most = std::min<int64_t>(max_groups, std::max<int64_t>(1, share));
  std::vector<v1::WorkItem> items;
  const absl::Time now = absl::Now();
  while (!pending_.empty() && static_cast<int64_t>(items.size()) < most) {
    auto it = groups_.find(pending_.front());
    pending_.pop_front();
    if (it == groups_.end()) continue;
    it->second.worker_id = worker_id;
    it->second.issued = now;
    ++stats_.groups_issued;
    items.push_back(it->second.item);
  }
  return items;
}

v1::SampleAck GroupTracker::Ack(const v1::ScoredSample& scored, v1::SampleAck::Status status,
                                std::string reason) {
  v1::SampleAck ack;
  ack.set_sample_id(scored.sample().key().sample_id());
  ack.set_status(status);
  ack.set_reason(std::move(reason));
  // Whatever was not taken into a live group wants no more turns; Deliver
  // answers ACCEPTED and DUPLICATE turns itself.
  ack.set_next_turn(v1::SampleAck::NEXT_TURN_NOT_WANTED);
  switch (status) {
    case v1::SampleAck::ACCEPTED: ++stats_.accepted; break;
    case v1::SampleAck::DUPLICATE: ++stats_.duplicate; break;
    case v1::SampleAck::STALE: ++stats_.stale; break;
    case v1::SampleAck::ORPHANED: ++stats_.orphaned; break;
    default: ++stats_.rejected; break;
  }
  return ack;
}

std::string GroupTracker::CheckSample(const v1::ScoredSample& scored, const Group& group) const {
  const v1::Sample& sample = scored.sample();
  const v1::SampleKey& key = sample.key();
  const int32_t size = group.item.group_size();
  if (key.index_in_group() < 0 || key.index_in_group() >= size) {
    return absl::StrCat("sample.key.index_in_group: ", key.index_in_group(), " outside [0, ",
                        size, ")");
  }
  if (key.turn() < 0 || key.turn() >= MaxTurns(group.item)) {
    return absl::StrCat("sample.key.turn: ", key.turn(), " outside [0, ", MaxTurns(group.item),
                        ")");
  }
  const std::string expected =
      TurnSampleId(group.item.job_id(), key.group_id(), key.index_in_group(), key.turn());
  if (key.sample_id() != expected || key.job_id() != group.item.job_id()) {
    return absl::StrCat("sample.key: sample_id \"", key.sample_id(), "\" and job_id \"",
                        key.job_id(), "\" do not match \"", expected, "\"");
  }
  if (sample.completion_logprobs_size() != sample.completion_tokens_size()) {
    return absl::StrCat("sample: ", sample.completion_logprobs_size(), " log-probs for ",
                        sample.completion_tokens_size(), " completion tokens");
  }
  if (!scored.has_verdict()) return "verdict: is required";
  return "";
}

v1::SampleAck::NextTurn GroupTracker::NextTurnFor(const std::string& group_id, int32_t index,
                                               int32_t turn) const {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return v1::SampleAck::NEXT_TURN_NOT_WANTED;
  const Group& group = it->second;
  if (index < 0 || index >= group.item.group_size() || turn < 0 ||
      turn >= MaxTurns(group.item)) {
    return v1::SampleAck::NEXT_TURN_NOT_WANTED;
  }
  const int32_t ended_at = group.ended_at[static_cast<size_t>(index)];
  if (ended_at >= 0 && ended_at <= turn) return v1::SampleAck::NEXT_TURN_NOT_WANTED;
  const v1::ScoredSample& held =
      group.turns[static_cast<size_t>(index)][static_cast<size_t>(turn)];
  if (held.sample().key().sample_id().empty()) return v1::SampleAck::NEXT_TURN_NOT_WANTED;
  return TrajectoryEnds(group.item.multi_turn(), held.verdict(), turn)
             ? v1::SampleAck::NEXT_TURN_NOT_WANTED
             : v1::SampleAck::NEXT_TURN_WANTED;
}

absl::StatusOr<v1::SampleAck> GroupTracker::Deliver(const v1::ScoredSample& scored) {
  absl::MutexLock lock(&mu_);
  const v1::SampleKey& key = scored.sample().key();
  if (key.sample_id().empty()) {
    return Ack(scored, v1::SampleAck::REJECTED, "sample.key.sample_id: is required");
  }
  if (accepted_ids_.contains(key.sample_id())) {
    // The learner's verdict of this turn decides, not the one delivered now.
    v1::SampleAck ack = Ack(scored, v1::SampleAck::DUPLICATE, "");
    ack.set_next_turn(NextTurnFor(key.group_id(), key.index_in_group(), key.turn()));
    return ack;
  }
  auto it = groups_.find(key.group_id());
  if (it == groups_.end() || it->second.issued == absl::InfinitePast()) {
    return Ack(scored, v1::SampleAck::ORPHANED,
               absl::StrCat("group ", key.group_id(), " is not in flight"));
  }
  Group& group = it->second;
  if (std::string reason = CheckSample(scored, group); !reason.empty()) {
    return Ack(scored, v1::SampleAck::REJECTED, std::move(reason));
  }
  const int64_t lag = policy_version_ - scored.sample().policy_version();
  // max_staleness bounds the gap between the policy that sampled and the one
  // trained; evaluation groups and warm-ups are never trained on, and an
  // evaluation's report names the step that offered it. Without this, a
  // round offered during fast supervised steps (several versions a second)
  // was re-issued until dropped.
  if (lag > options_.max_staleness && IsTrainingGroup(group.item)) {
    // The group cannot complete within the bound: sample it again.
    Retire(key.group_id(), "its samples fell more than max_staleness versions behind");
    return Ack(scored, v1::SampleAck::STALE,
               absl::StrCat("policy version ", scored.sample().policy_version(), " is ", lag,
                            " behind ", policy_version_, " (max_staleness ",
                            options_.max_staleness, ")"));
  }
  // Only complete groups count against the bound: samples of groups still
  // filling must always get in, or no group could complete to free room.
  if (completed_samples_ >= options_.max_buffered_samples) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the experience buffer holds ", completed_samples_,
                     " samples of complete groups (max_buffered_samples); retry"));
  }
  const int32_t index = key.index_in_group();
  const int32_t ended_at = group.ended_at[static_cast<size_t>(index)];
  if (ended_at >= 0 && key.turn() > ended_at) {
    return Ack(scored, v1::SampleAck::ORPHANED,
               absl::StrCat("trajectory ", index, " of group ", key.group_id(), " ended at turn ",
                            ended_at));
  }
  group.turns[static_cast<size_t>(index)][static_cast<size_t>(key.turn())] = scored;
  ++group.received;
  ++buffered_;
  accepted_ids_.insert(key.sample_id());
  v1::SampleAck ack = Ack(scored, v1::SampleAck::ACCEPTED, "");
  AdvanceTrajectory(group, index);
  ack.set_next_turn(NextTurnFor(key.group_id(), index, key.turn()));
  if (group.ended == group.item.group_size()) {
    pace_.push_back(absl::Now() - group.issued);
    if (pace_.size() > kPaceWindow) pace_.pop_front();
    stats_.samples_completed += static_cast<uint64_t>(group.received);
    completed_samples_ += group.received;
    CompletedGroup done{std::move(group.item), {}};
    done.samples.reserve(static_cast<size_t>(group.received));
    for (size_t i = 0; i < group.turns.size(); ++i) {
      for (int32_t t = 0; t <= group.ended_at[i]; ++t) {
        done.samples.push_back(std::move(group.turns[i][static_cast<size_t>(t)]));
      }
    }
    completed_.push_back(std::move(done));
    groups_.erase(it);
    ++stats_.groups_completed;
  }
  return ack;
}

void GroupTracker::AdvanceTrajectory(Group& group, int32_t index) {
  const size_t i = static_cast<size_t>(index);
  if (group.ended_at[i] >= 0) return;
  std::vector<v1::ScoredSample>& turns = group.turns[i];
  for (size_t t = 0; t < turns.size() && !turns[t].sample().key().sample_id().empty(); ++t) {
    if (!TrajectoryEnds(group.item.multi_turn(), turns[t].verdict(), static_cast<int32_t>(t))) {
      continue;
    }
    group.ended_at[i] = static_cast<int32_t>(t);
    ++group.ended;
    // Turns held past the end came from a worker that saw another verdict
    // for turn t (a re-verification): they leave the books as discarded,
    // and a re-send of them is ORPHANED.
    for (size_t later = t + 1; later < turns.size(); ++later) {
      if (turns[later].sample().key().sample_id().empty()) continue;
      accepted_ids_.erase(turns[later].sample().key().sample_id());
      turns[later].Clear();
      --group.received;
      --buffered_;
      ++stats_.samples_discarded;
    }
    return;
  }
}

void GroupTracker::DiscardHeld(const Group& group, bool forget_ids) {
  for (const std::vector<v1::ScoredSample>& turns : group.turns) {
    for (const v1::ScoredSample& s : turns) {
      if (s.sample().key().sample_id().empty()) continue;
      if (forget_ids) accepted_ids_.erase(s.sample().key().sample_id());
      --buffered_;
      ++stats_.samples_discarded;
    }
  }
}

void GroupTracker::Retire(const std::string& group_id, const std::string& why) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return;
  Group old = std::move(it->second);
  groups_.erase(it);
  DiscardHeld(old, /*forget_ids=*/true);
  const int32_t attempt = old.item.attempt() + 1;
  if (attempt > options_.max_reissues) {
    ++stats_.groups_dropped;
    last_drop_reason_ = why;
    return;
  }
  Group next;
  next.base_id = old.base_id;
  next.item = std::move(old.item);
  next.item.set_attempt(attempt);
  next.item.set_group_id(absl::StrCat(old.base_id, "~r", attempt));
  // Sampled afresh, so under the current policy at least: a group retired
  // for a stale sample must not be sampled stale again by a worker still
  // holding older weights, and the job driver counts it as a group of now.
  next.item.set_min_policy_version(std::max(next.item.min_policy_version(), policy_version_));
  next.turns.assign(static_cast<size_t>(next.item.group_size()),
                    std::vector<v1::ScoredSample>(static_cast<size_t>(MaxTurns(next.item))));
  next.ended_at.assign(static_cast<size_t>(next.item.group_size()), -1);
  const std::string id = next.item.group_id();
  used_group_ids_.insert(id);
  groups_.emplace(id, std::move(next));
  pending_.push_front(id);  // re-issues go first: their job is waiting on them
  ++stats_.groups_reissued;
}

absl::Duration GroupTracker::GroupWaitLocked() const {
  if (options_.wait_factor <= 0 || pace_.empty() ||
      pace_.size() < static_cast<size_t>(options_.min_observed)) {
    return options_.group_timeout;
  }
  const absl::Duration slowest = *std::max_element(pace_.begin(), pace_.end());
  return std::min(options_.group_timeout,
                  std::max(options_.wait_floor, options_.wait_factor * slowest));
}

absl::Duration GroupTracker::GroupWait() const {
  absl::MutexLock lock(&mu_);
  return GroupWaitLocked();
}

void GroupTracker::Expire(absl::Time now) {
  absl::MutexLock lock(&mu_);
  const absl::Duration wait = GroupWaitLocked();
  std::vector<std::string> paced, timed_out;
  for (const auto& [id, group] : groups_) {
    if (group.issued == absl::InfinitePast()) continue;
    const absl::Duration age = now - group.issued;
    if (age > options_.group_timeout) {
      timed_out.push_back(id);
    } else if (age > wait && group.item.attempt() < options_.max_reissues) {
      paced.push_back(id);  // a re-issue; drops wait for the ceiling
    }
  }
  const std::string pace_why = absl::StrCat(
      "not scored within ", absl::FormatDuration(wait), " (the pace bound: ",
      options_.wait_factor, "x the slowest of the last ", pace_.size(),
      " groups, at least ", absl::FormatDuration(options_.wait_floor), ")");
  for (const std::string& id : paced) Retire(id, pace_why);
  for (const std::string& id : timed_out) {
    Retire(id, absl::StrCat("not scored within the group timeout (",
                            absl::FormatDuration(options_.group_timeout), ")"));
  }
}

std::string GroupTracker::DescribeWaiting(const std::string& job_id, int limit) const {
  absl::MutexLock lock(&mu_);
  std::vector<const Group*> issued;
  int64_t unissued = 0;
  for (const auto& [id, group] : groups_) {
    if (group.item.job_id() != job_id) continue;
    if (group.issued == absl::InfinitePast()) {
      ++unissued;
    } else {
      issued.push_back(&group);
    }
  }
  std::sort(issued.begin(), issued.end(),
            [](const Group* a, const Group* b) { return a->issued < b->issued; });
  const absl::Time now = absl::Now();
  std::vector<std::string> parts;
  for (const Group* group : issued) {
    if (static_cast<int>(parts.size()) >= limit) break;
    std::vector<std::string> missing;
    for (size_t i = 0; i < group->ended_at.size(); ++i) {
      if (group->ended_at[i] < 0) missing.push_back(absl::StrCat(i));
    }
    parts.push_back(absl::StrCat("group ", group->item.group_id(), " on worker ", group->worker_id,
                                 " for ", absl::ToInt64Seconds(now - group->issued),
                                 "s: samples ", absl::StrJoin(missing, ","), " of ",
                                 group->ended_at.size(), " missing"));
  }
  if (issued.size() > parts.size()) {
    parts.push_back(absl::StrCat(issued.size() - parts.size(), " more issued"));
  }
  if (unissued > 0) parts.push_back(absl::StrCat(unissued, " not yet taken by a worker"));
  return parts.empty() ? "nothing in flight" : absl::StrJoin(parts, "; ");
}

void GroupTracker::WorkerGone(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> held;
  for (const auto& [id, group] : groups_) {
    if (group.issued != absl::InfinitePast() && group.worker_id == worker_id) held.push_back(id);
  }
  for (const std::string& id : held) Retire(id, absl::StrCat("its worker ", worker_id, " is gone"));
}

absl::StatusOr<bool> GroupTracker::Release(const std::string& worker_id,
                                           const std::string& group_id,
                                           const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(group_id);
  if (it == groups_.end()) {
    return absl::NotFoundError(absl::StrCat("group \"", group_id, "\" is not live (completed, "
                                            "re-issued, dropped or never issued)"));
  }
  if (it->second.issued == absl::InfinitePast() || it->second.worker_id != worker_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("group \"", group_id, "\" is not issued to worker \"", worker_id, "\""));
  }
  const uint64_t reissued = stats_.groups_reissued;
  Retire(group_id, absl::StrCat("released by worker ", worker_id,
                                reason.empty() ? "" : absl::StrCat(": ", reason)));
  return stats_.groups_reissued > reissued;
}

std::string GroupTracker::LastDropReason() const {
  absl::MutexLock lock(&mu_);
  return last_drop_reason_;
}

std::vector<CompletedGroup> GroupTracker::TakeCompleted(absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  auto has_completed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !completed_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&has_completed), wait);
  std::vector<CompletedGroup> out(std::make_move_iterator(completed_.begin()),
                                  std::make_move_iterator(completed_.end()));
  completed_.clear();
  for (const CompletedGroup& group : out) {
    buffered_ -= static_cast<int64_t>(group.samples.size());
    completed_samples_ -= static_cast<int64_t>(group.samples.size());
    // Their ids stay in accepted_ids_: a late re-send is still a DUPLICATE.
    // The set is trimmed to the newest ids so it stays bounded.
    for (const v1::ScoredSample& s : group.samples) taken_ids_.push_back(s.sample().key().sample_id());
  }
  while (static_cast<int64_t>(taken_ids_.size()) > options_.max_buffered_samples) {
    accepted_ids_.erase(taken_ids_.front());
    taken_ids_.pop_front();
  }
  return out;
}

void GroupTracker::SetPolicyVersion(int64_t version) {
  absl::MutexLock lock(&mu_);
  policy_version_ = version;
}

void GroupTracker::SetJobBounds(const JobBounds& bounds) {
  absl::MutexLock lock(&mu_);
  options_.group_timeout = bounds.group_timeout;
  options_.max_staleness = bounds.max_staleness;
  options_.wait_factor = bounds.wait_factor;
  options_.wait_floor = bounds.wait_floor;
  options_.min_observed = bounds.min_observed;
  pace_.clear();
}

GroupTracker::UntakenCount GroupTracker::UntakenGroups(const std::string& job_id,
                                                       int64_t offered_from) const {
  absl::MutexLock lock(&mu_);
  UntakenCount count;
  auto add = [&](const v1::WorkItem& item) {
    if (item.job_id() != job_id) return;
    if (!IsTrainingGroup(item)) {
      ++count.rounds;
      return;
    }
    ++count.all;
    if (item.min_policy_version() >= offered_from) ++count.offered_from;
  };
  for (const auto& [id, group] : groups_) add(group.item);
  for (const CompletedGroup& group : completed_) add(group.item);
  return count;
}

void GroupTracker::DropJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (it->second.item.job_id() != job_id) {
      ++it;
      continue;
    }
    DiscardHeld(it->second, /*forget_ids=*/false);
    groups_.erase(it++);
  }
  for (auto it = completed_.begin(); it != completed_.end();) {
    if (it->item.job_id() != job_id) {
      ++it;
      continue;
    }
    buffered_ -= static_cast<int64_t>(it->samples.size());
    completed_samples_ -= static_cast<int64_t>(it->samples.size());
    it = completed_.erase(it);
  }
  // pending_ may still name dropped ids; Take skips ids it cannot find.
}

GroupTracker::Stats GroupTracker::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.groups_pending = static_cast<int64_t>(pending_.size());
  s.groups_in_flight = static_cast<int64_t>(groups_.size()) - s.groups_pending;
  s.takers = takers_;
  s.samples_buffered = buffered_;
  s.samples_held = buffered_ - completed_samples_;
  s.group_wait = GroupWaitLocked();
  return s;
}

}  // namespace kforge
