// Credit for multi-turn trajectories (issue 24): a trajectory is the turns
// one sample went through (write, read the verifier's feedback, write
// again), each turn with the reward of its own verdict. Each turn's tokens
// are trained with the advantage computed here.
//
//   // rewards[i][t]: the reward of turn t of the group's trajectory i.
//   KF_ASSIGN_OR_RETURN(auto advantages,
//       TurnAdvantages(rewards, {.gamma = 0.4, .baseline = TurnBaseline::kLeaveOneOut}));
//
// RETURNS. A turn is credited with its own reward and, discounted by gamma
// per turn, the rewards of the turns after it:
//   G_t = r_t + gamma r_{t+1} + gamma^2 r_{t+2} + ...
// so a turn that set up a later fix shares in it (Kevin-32B credits turns so,
// with gamma 0.4); gamma 0 credits each turn alone, gamma 1 with everything
// that followed.
//
// BASELINES, over the group's trajectories at the same turn index (only
// those that reached it: a trajectory ends at its first correct and fast
// enough turn, or at the job's last turn):
//   kGroupMean:   the mean return of every trajectory at turn t, its own
//                 included: GRPO's group mean, per turn.
//   kLeaveOneOut: the mean return of the other trajectories at turn t
//                 (Dr. Kernel's turn-level REINFORCE leave-one-out, TRLOO).
// With n trajectories at a turn, the group mean's advantage is (n-1)/n times
// the leave-one-out one: a sample's own return lowers its own advantage, and
// the more so the fewer trajectories reached the turn, which weighs late
// turns (reached by few) less than early ones for no reason of their own.
// A turn no other trajectory reached has nothing to be compared with: its
// advantage is 0 under either baseline, as for a group of one.
#ifndef KFORGE_LEARNER_REWARDS_TURN_CREDIT_H_
#define KFORGE_LEARNER_REWARDS_TURN_CREDIT_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kforge {

enum class TurnBaseline { kGroupMean, kLeaveOneOut };

struct TurnCreditOptions {
  double gamma = 0;  // in [0, 1]
  TurnBaseline baseline = TurnBaseline::kLeaveOneOut;
};

// G_t for each turn of one trajectory.
std::vector<double> DiscountedReturns(absl::Span<const double> rewards, double gamma);

// advantages[i][t] for rewards[i][t]. INVALID_ARGUMENT for gamma outside
// [0, 1], an empty trajectory (it names which) or a reward that is not finite.
absl::StatusOr<std::vector<std::vector<double>>> TurnAdvantages(
    const std::vector<std::vector<double>>& rewards, const TurnCreditOptions& options);

// The turn with the highest reward, the earliest of equals (it cost fewer
// turns): what best-of-N and SFT keep of a trajectory. -1 when empty.
int BestTurn(absl::Span<const double> rewards);

}  // namespace kforge

#endif  // KFORGE_LEARNER_REWARDS_TURN_CREDIT_H_
