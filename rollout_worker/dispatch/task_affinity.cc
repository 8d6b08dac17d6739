#include "rollout_worker/dispatch/task_affinity.h"

#include <algorithm>

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

std::optional<size_t> AffinityChoice(std::string_view task, std::span<const std::string> addresses,
                                     std::span<const int> in_flight, int slack) {
  if (addresses.empty() || in_flight.size() != addresses.size()) return std::nullopt;
  size_t preferred = 0;
  uint64_t best = TaskAffinityScore(task, addresses[0]);
  for (size_t i = 1; i < addresses.size(); ++i) {
    const uint64_t score = TaskAffinityScore(task, addresses[i]);
    if (score > best) {
      preferred = i;
      best = score;
    }
  }
  const int least = *std::min_element(in_flight.begin(), in_flight.end());
  if (in_flight[preferred] > least + slack) return std::nullopt;
  return preferred;
}

}  // namespace kforge
