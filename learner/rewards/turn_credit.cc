#include "learner/rewards/turn_credit.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace kforge {

std::vector<double> DiscountedReturns(absl::Span<const double> rewards, double gamma) {
  std::vector<double> returns(rewards.size());
  double later = 0;  // the discounted return of the next turn
  for (size_t t = rewards.size(); t-- > 0;) {
    later = rewards[t] + gamma * later;
    returns[t] = later;
  }
  return returns;
}

absl::StatusOr<std::vector<std::vector<double>>> TurnAdvantages(
    const std::vector<std::vector<double>>& rewards, const TurnCreditOptions& options) {
  if (!(options.gamma >= 0 && options.gamma <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("turn credit: gamma ", options.gamma, " is outside [0, 1]"));
  }
  size_t turns = 0;
  std::vector<std::vector<double>> returns;
  returns.reserve(rewards.size());
  for (size_t i = 0; i < rewards.size(); ++i) {
    if (rewards[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("turn credit: trajectory ", i, " has no turn"));
    }
    for (size_t t = 0; t < rewards[i].size(); ++t) {
      if (!std::isfinite(rewards[i][t])) {
        return absl::InvalidArgumentError(absl::StrCat("turn credit: trajectory ", i, " turn ", t,
                                                       ": reward ", rewards[i][t], " is not finite"));
      }
    }
    returns.push_back(DiscountedReturns(rewards[i], options.gamma));
    turns = std::max(turns, rewards[i].size());
  }
  std::vector<std::vector<double>> advantages(rewards.size());
  for (size_t i = 0; i < rewards.size(); ++i) advantages[i].assign(rewards[i].size(), 0);
  for (size_t t = 0; t < turns; ++t) {
    double sum = 0;
    int reached = 0;
    for (const std::vector<double>& g : returns) {
      if (t < g.size()) {
        sum += g[t];
        ++reached;
      }
    }
    if (reached < 2) continue;  // nothing to compare with: advantage 0
    for (size_t i = 0; i < returns.size(); ++i) {
      if (t >= returns[i].size()) continue;
      const double own = returns[i][t];
      const double baseline = options.baseline == TurnBaseline::kLeaveOneOut
                                  ? (sum - own) / (reached - 1)
                                  : sum / reached;
      advantages[i][t] = own - baseline;
    }
  }
  return advantages;
}

int BestTurn(absl::Span<const double> rewards) {
  if (rewards.empty()) return -1;
  return static_cast<int>(std::max_element(rewards.begin(), rewards.end()) - rewards.begin());
}

}  // namespace kforge
