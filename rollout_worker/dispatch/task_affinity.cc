#include "rollout_worker/dispatch/task_affinity.h"

#include <algorithm>
#include <utility>

namespace kforge {

uint64_t TaskAffinityScore(std::string_view task, std::string_view address) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
  for (char c : task) mix(static_cast<unsigned char>(c));
  mix(0);
  for (char c : address) mix(static_cast<unsigned char>(c));
  // A final avalanche: FNV's last bytes alone would order similar
  // addresses ("...:50052", "...:50053") the same way for every task.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

std::vector<size_t> AffinityRanking(std::string_view task, std::span<const std::string> addresses) {
  std::vector<std::pair<uint64_t, size_t>> scored;
  scored.reserve(addresses.size());
  for (size_t i = 0; i < addresses.size(); ++i) {
    scored.emplace_back(TaskAffinityScore(task, addresses[i]), i);
  }
  // Ties (equal scores, a 2^-64 chance) break by address, not by position,
  // so that the order stays the same in every process.
  std::sort(scored.begin(), scored.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return addresses[a.second] < addresses[b.second];
  });
  std::vector<size_t> ranking;
  ranking.reserve(scored.size());
  for (const auto& [score, index] : scored) ranking.push_back(index);
  return ranking;
}

std::optional<size_t> AffinityChoice(std::string_view task, std::span<const std::string> addresses,
                                     std::span<const int> in_flight, int slack,
                                     std::optional<size_t> avoid) {
  if (addresses.empty() || in_flight.size() != addresses.size()) return std::nullopt;
  const int least = *std::min_element(in_flight.begin(), in_flight.end());
  for (size_t index : AffinityRanking(task, addresses)) {
    if (index != avoid && in_flight[index] <= least + slack) return index;
  }
  return std::nullopt;
}

}  // namespace kforge
