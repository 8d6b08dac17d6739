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

namespace kforge {

// Rendezvous (highest random weight) hashing: each task ranks the verifiers
// by this score and prefers the first, so adding or losing a verifier moves
// only the tasks it wins or held. FNV-1a with a final avalanche: the same in
// every process (absl::Hash is seeded per process).
uint64_t TaskAffinityScore(std::string_view task, std::string_view address);

// The index in `addresses` that `task` prefers, if that one has at most
// `slack` requests in flight beyond the least busy (`in_flight` is indexed
// like `addresses`); nullopt when it is past that, so the caller sends the
// overflow where the least is in flight and a busy task does not queue
// behind itself. Empty `addresses`: nullopt.
std::optional<size_t> AffinityChoice(std::string_view task, std::span<const std::string> addresses,
                                     std::span<const int> in_flight, int slack);

}  // namespace kforge

#endif  // KFORGE_ROLLOUT_WORKER_DISPATCH_TASK_AFFINITY_H_
