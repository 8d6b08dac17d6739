#include "learner/rollout/seed_batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kforge {

SeedBatch SeedBatchAt(absl::string_view job_id, int64_t rl_step, int64_t rotation) {
  const int64_t steps = std::max<int64_t>(1, rotation);
  const int64_t first = std::max<int64_t>(0, rl_step) / steps * steps;
  return {.id = absl::StrCat(job_id, "/b", first),
          .next_id = absl::StrCat(job_id, "/b", first + steps)};
}

}  // namespace kforge
