#include "learner/rollout/warm_up_round.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kforge {

bool WarmUpRound::Accepted(const v1::Verdict& verdict) {
  return verdict.correct() && verdict.hack_flags_size() == 0;
}

std::string WarmUpRound::WhyNotAccepted(const v1::Verdict& verdict) {
  for (const v1::StageResult& stage : verdict.stages()) {
    if (stage.outcome() == v1::OUTCOME_PASSED || stage.outcome() == v1::OUTCOME_SKIPPED) continue;
    std::string message = stage.message().substr(0, 160);
    return absl::StrCat(v1::Stage_Name(stage.stage()), " ", v1::StageOutcome_Name(stage.outcome()),
                        message.empty() ? "" : ": ", message);
  }
  if (verdict.hack_flags_size() > 0) {
    return absl::StrCat("flagged ", v1::HackFlag_Name(verdict.hack_flags(0)));
  }
  return absl::StrCat("not correct, reached ", v1::Stage_Name(verdict.stage_reached()));
}

std::string WarmUpRound::GroupId(size_t index, const std::string& nonce) {
  return absl::StrFormat("w%03d-%s", index, nonce);
}

void WarmUpRound::Open(std::vector<std::string> task_ids, absl::Time now) {
  // One verdict a task is kept: a task named twice would never be complete.
  task_ids_.clear();
  absl::flat_hash_set<std::string> named;
  for (std::string& id : task_ids) {
    if (named.insert(id).second) task_ids_.push_back(std::move(id));
  }
  back_.clear();
  opened_ = now;
}

bool WarmUpRound::Take(const CompletedGroup& group, absl::Time now) {
  const std::string& task = group.item.task().id();
  if (group.samples.empty() || back_.contains(task) ||
      std::find(task_ids_.begin(), task_ids_.end(), task) == task_ids_.end()) {
    return false;
  }
  back_.emplace(task, Back{.verdict = group.samples.front().verdict(), .after = now - opened_});
  return true;
}

std::string WarmUpRound::Summary() const {
  std::vector<double> speedups;
  std::vector<std::string> failed;
  absl::Duration last = absl::ZeroDuration();
  for (const std::string& task : task_ids_) {
    auto it = back_.find(task);
    if (it == back_.end()) continue;
    const v1::Verdict& verdict = it->second.verdict;
    last = std::max(last, it->second.after);
    if (Accepted(verdict)) {
      if (verdict.speedup_vs_eager() > 0) speedups.push_back(verdict.speedup_vs_eager());
    } else {
      failed.push_back(absl::StrCat(task, " (", WhyNotAccepted(verdict), ")"));
    }
  }
  const size_t correct = back_.size() - failed.size();
  std::string summary =
      absl::StrFormat("verifier warm-up: %d of %d training tasks' reference solutions verified "
                      "correct",
                      correct, task_ids_.size());
  if (!speedups.empty()) {
    std::sort(speedups.begin(), speedups.end());
    absl::StrAppendFormat(&summary, " (speedup over eager %.2f-%.2fx, median %.2fx)",
                          speedups.front(), speedups.back(), speedups[speedups.size() / 2]);
  }
  if (back_.size() < task_ids_.size()) {
    absl::StrAppendFormat(&summary, "; %d not back", task_ids_.size() - back_.size());
  }
  absl::StrAppendFormat(&summary, "; %s back %.1f s after they went out",
                        back_.size() == task_ids_.size() ? "all" : "the last",
                        absl::ToDoubleSeconds(last));
  if (!failed.empty()) absl::StrAppend(&summary, "; not correct: ", absl::StrJoin(failed, "; "));
  return summary;
}

}  // namespace kforge
