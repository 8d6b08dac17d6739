#include "learner/rollout/eval_round.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace kforge {
namespace {

// The step in "e000040-2-ab12cd~r1"; -1 for an id of another form.
int64_t StepOf(absl::string_view group_id) {
  if (group_id.size() < 2 || group_id[0] != 'e') return -1;
  const size_t dash = group_id.find('-');
  int64_t step = -1;
  if (dash == absl::string_view::npos || !absl::SimpleAtoi(group_id.substr(1, dash - 1), &step)) {
    return -1;
  }
  return step;
}

}  // namespace

std::string EvalRound::GroupId(int64_t step, size_t index, const std::string& nonce) {
  return absl::StrFormat("e%06d-%d-%s", step, index, nonce);
}

void EvalRound::Open(int64_t step, size_t offered) {
  step_ = step;
  offered_ = offered;
  groups_.clear();
}

bool EvalRound::Take(CompletedGroup group) {
  if (!open() || StepOf(group.item.group_id()) != step_) return false;
  groups_.push_back(std::move(group));
  return true;
}

EvalRound::Summary EvalRound::Close() {
  Summary summary{.step = step_, .offered = offered_, .groups = std::move(groups_)};
  int64_t low = std::numeric_limits<int64_t>::max();
  int64_t high = std::numeric_limits<int64_t>::min();
  for (const CompletedGroup& group : summary.groups) {
    for (const v1::ScoredSample& s : group.samples) {
      low = std::min(low, s.sample().policy_version());
      high = std::max(high, s.sample().policy_version());
    }
  }
  if (low <= high) {
    summary.min_policy_version = low;
    summary.max_policy_version = high;
  }
  step_ = -1;
  offered_ = 0;
  groups_.clear();
  return summary;
}

}  // namespace kforge
