#include "learner/rollout/offer_window.h"

#include <algorithm>

namespace kforge {

namespace {

// Groups offered for the steps `first` .. `last` after the one collected
// (0: that one): each step's batch and its spares, at most a batch of them,
// none for the job's last step (nothing could train them).
int64_t GroupsForSteps(const OfferWindow& window, int64_t first, int64_t last) {
  const int64_t spares = std::clamp<int64_t>(window.spare_groups, 0, window.prompts_per_step);
  int64_t groups = 0;
  for (int64_t k = first; k <= last; ++k) {
    groups += window.prompts_per_step + (window.steps_after - k > 0 ? spares : 0);
  }
  return groups;
}

// What the cap leaves room for: prompts_per_step for each of `steps` steps,
// less every group out that they would train.
int64_t Room(const OfferWindow& window, int64_t steps, int64_t out) {
  return window.prompts_per_step * std::max<int64_t>(0, steps) - out;
}

}  // namespace

int64_t StepsAhead(const OfferWindow& window) {
  const int64_t ahead = std::min<int64_t>(
      {static_cast<int64_t>(window.lookahead_steps), static_cast<int64_t>(window.max_staleness),
       window.steps_after});
  return std::max<int64_t>(0, ahead);
}

int64_t GroupsToOfferWhileCollecting(const OfferWindow& window, const GroupsOut& out) {
  const int64_t target = GroupsForSteps(window, 0, StepsAhead(window));
  const int64_t counted = out.untaken + out.batch + out.carried;
  return std::max<int64_t>(0, std::min(target - counted,
                                       Room(window, 1 + window.steps_after, counted + out.older)));
}

int64_t GroupsToOfferAfterBatch(const OfferWindow& window, const GroupsOut& out) {
  if (window.max_staleness <= 0 || window.steps_after <= 0) return 0;
  const int64_t target = GroupsForSteps(window, 1, std::max<int64_t>(1, StepsAhead(window)));
  const int64_t counted = out.untaken + out.carried;  // the batch trains now
  return std::max<int64_t>(
      0, std::min(target - counted, Room(window, window.steps_after, counted + out.older)));
}

}  // namespace kforge
