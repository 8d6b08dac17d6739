// Task affinity: which verifier a task's candidates go to, the same choice in
// every process that makes it (each rollout worker's dispatcher, and the
// verifier batch benchmark, which places candidates over GPUs as a node's
// rollout workers would). One verifier per task means one reference epoch
// and one verdict cache serve the task's candidates instead of each verifier
// building its own.
#ifndef KFORGE_ROLLOUT_WORKER_DISPATCH_TASK_AFFINITY_H_
#define KFORGE_ROLLOUT_WORKER_DISPATCH_TASK_AFFINITY_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kforge {

// Rendezvous (highest random weight) hashing: each task ranks the verifiers
// by this score and prefers the first, so adding or losing a verifier moves
// only the tasks it wins or held. FNV-1a with a final avalanche: the same in
// every process (absl::Hash is seeded per process).
uint64_t TaskAffinityScore(std::string_view task, std::string_view address);

// The indices of `addresses` in `task`'s order of preference (highest score
// first): the same order in every process, whatever order they are listed in.
std::vector<size_t> AffinityRanking(std::string_view task, std::span<const std::string> addresses);

// Bounded-load rendezvous hashing (Mirrokni, Thorup and Zadimoghaddam,
// "Consistent Hashing with Bounded Loads", 2016): the first index in
// `task`'s ranking that has at most `slack` requests in flight beyond the
// least busy (`in_flight` is indexed like `addresses`) and is not `avoid`.
// A task past its first choice's bound overflows to its second, then its
// third: a few verifiers serve a task's candidates in every process, each
// with the task's reference epoch made, where sending the overflow to
// whichever verifier is least busy spread every task over every verifier,
// and each made the task's epoch on demand (10-18 s of its GPU under load,
// measured on 4x H200, which the candidates queued behind). The least busy
// always qualifies, so a choice exists unless `addresses` is empty, the
// counts mismatch, or `avoid` is the only address.
std::optional<size_t> AffinityChoice(std::string_view task, std::span<const std::string> addresses,
                                     std::span<const int> in_flight, int slack,
                                     std::optional<size_t> avoid = std::nullopt);

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_DISPATCH_TASK_AFFINITY_H_
