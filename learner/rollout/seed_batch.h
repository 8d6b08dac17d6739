// Reference batches: which secret input seeds a group's candidates meet. A
// verifier keeps one reference epoch (seeds and reference outputs) per task
// and batch. The learner names a group's batch from the RL step it is
// offered at, so the first RL steps' batch is known while the warm start
// still trains (the verifier warm-ups are checked on it), and every
// candidate of a group, re-issues and later turns included, meets one set
// of inputs.
//
//   SeedBatch batch = SeedBatchAt(job.id(), rl_steps_done, rotation);
//   item.set_batch_id(batch.id);            // "job-000001/b4" for steps 4..7
//   item.set_next_batch_id(batch.next_id);  // "job-000001/b8", made ahead
#ifndef KFORGE_LEARNER_ROLLOUT_SEED_BATCH_H_
#define KFORGE_LEARNER_ROLLOUT_SEED_BATCH_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kforge {

struct SeedBatch {
  std::string id;
  std::string next_id;  // the batch the following rotation's groups meet
};

// `rl_step`: RL steps done when the group is offered (0 for the first RL
// step's groups and during the warm start; below 0 counts as 0).
// `rotation`: MultiInputOptions.seed_rotation_versions, the RL steps that
// share a batch (below 1 counts as 1).
SeedBatch SeedBatchAt(absl::string_view job_id, int64_t rl_step, int64_t rotation);

}  // namespace kforge

#endif  // KFORGE_LEARNER_ROLLOUT_SEED_BATCH_H_
