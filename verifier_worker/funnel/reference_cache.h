// Reference work shared by the candidates of a task: one reference epoch
// holds the secret input plan (seeds), the model's init seed, and the
// reference server's input sets and outputs, computed once and reused by
// every candidate of that task until the epoch ends. An epoch ends when the
// candidates' batch changes (a new batch draws new secret seeds), after
// `max_uses` candidates or after `max_age`, so no seed serves a task for
// ever. Concurrent candidates of a task whose epoch is being computed wait
// for that one computation instead of repeating it.
//
//   ReferenceCache cache(/*max_bytes=*/8 << 30);
//   bool reused = false;
//   KF_ASSIGN_OR_RETURN(std::shared_ptr<const ReferenceEpoch> epoch,
//                       cache.Get(scope, batch_id, {.max_uses = 1024, .max_age = absl::Minutes(30)},
//                                 make_epoch, &reused));
//
// Epochs are immutable once made, and held by shared_ptr: one dropped from
// the cache (for room, or because a new one replaced it) lives on while a
// verification still reads it, outside the byte bound. Thread-safe.
#ifndef KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_CACHE_H_
#define KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_CACHE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "verifier_worker/funnel/input_plan.h"
#include "verifier_worker/funnel/reference_set.h"
#include "verifier_worker/sandbox/frame.h"

namespace kforge {

struct ReferenceEpoch {
  InputPlan plan;
  uint64_t init_seed = 0;
  Frame prepared;  // owns the bytes the sets point into
  std::map<std::string, ReferenceSet> sets;
  // The reference server's payload (or the sealed buffer it wrote) and the
  // sets' shared copies of their inputs.
  int64_t bytes() const {
    uint64_t total = prepared.PayloadBytes().size();
    for (const auto& [name, set] : sets) {
      if (set.shared_inputs != nullptr) total += set.shared_inputs->size();
    }
    return static_cast<int64_t>(total);
  }
};

class ReferenceCache {
 public:
  struct Reuse {
    int max_uses = 1;
    absl::Duration max_age = absl::ZeroDuration();
  };
  using Maker = std::function<absl::StatusOr<std::shared_ptr<const ReferenceEpoch>>()>;

  explicit ReferenceCache(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // The current epoch of `scope` (a task under one input-plan config) and
  // `batch_id` if it has uses and time left; else a new one from `make`,
  // which then becomes current. `reused` says which. A failed make is
  // returned, to the callers that waited for it too, and not cached.
  absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> Get(const std::string& scope,
                                                            const std::string& batch_id,
                                                            const Reuse& reuse, const Maker& make,
                                                            bool* reused);

  // Makes the epoch of `scope` and `batch_id` ahead of its candidates, with
  // `make` on the caller's thread, unless one is held, being made, or was
  // made ahead before and failed or was dropped: false then, without
  // calling `make`. A
  // prefetched epoch starts with no uses and its age from now, and is the
  // first dropped when the cache is over its bytes (itself, if nothing else
  // can go) until a candidate uses it. Candidates that ask for it while it
  // is made wait for it; if that make fails, the first of them makes the
  // epoch itself (a prefetch's failure changes no verdict).
  absl::StatusOr<bool> Prefetch(const std::string& scope, const std::string& batch_id,
                                const Maker& make);

  // The name of a scope's epoch of one batch.
  static std::string Key(const std::string& scope, const std::string& batch_id);
  // Whether an epoch of `scope` and `batch_id` is held or being made, or
  // was made ahead and failed or was dropped for room (not to be made ahead
  // again).
  bool Holds(const std::string& scope, const std::string& batch_id) const;

  // Epochs held now, and their payload bytes.
  int size() const;
  int64_t bytes() const;

 private:
  struct Slot {
    std::shared_ptr<const ReferenceEpoch> epoch;
    int uses = 0;
    absl::Time created;
    absl::Time last_used;
    bool making = false;
    int64_t generation = 0;     // makes finished
    absl::Status last_error;    // of the last make
    // The last make was ahead of the batch's candidates (Prefetch): its
    // failure is not theirs. Once such a make failed or its epoch was
    // dropped for room (ahead_spent), the batch's epoch is not made ahead
    // again: its first candidate makes it, as without a prefetch.
    bool made_ahead = false;
    bool ahead_spent = false;
  };
  // `make` for `key`, whose slot the caller marked as making; the slot then
  // starts with `uses` if it succeeded.
  absl::StatusOr<std::shared_ptr<const ReferenceEpoch>> RunMake(const std::string& key,
                                                               const Maker& make, int uses);
  void FinishMake(const std::string& key,
                  const absl::StatusOr<std::shared_ptr<const ReferenceEpoch>>& made, int uses);
  void EvictLocked(const std::string& keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::CondVar made_;
  absl::flat_hash_map<std::string, Slot> slots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_VERIFIER_WORKER_FUNNEL_REFERENCE_CACHE_H_
