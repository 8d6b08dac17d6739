// Everything the learner checks before it accepts a job: fills defaults from
// the proto annotations, checks every range, the relations between fields,
// the model folder and the task set. The error names the field:
//
//   INVALID_ARGUMENT: spec.optimizer.micro_batch_size: 128 is larger than
//     spec.optimizer.batch_size 64
#ifndef KFORGE_LEARNER_JOBS_JOB_SPEC_CHECK_H_
#define KFORGE_LEARNER_JOBS_JOB_SPEC_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "kforge/v1/job.pb.h"
#include "learner/jobs/path_roots.h"

namespace kforge {

struct JobSpecCheckContext {
  // Folder holding the built-in task sets (TaskSetSpec.builtin).
  std::string builtin_tasks_root;
  // Where the job's paths must stay (path_roots.h). Not owned; null: no
  // confinement (library tests only; the learner always sets it).
  const JobPathRoots* roots = nullptr;
};

// On success `spec` holds the effective spec (defaults filled in, paths
// resolved). Paths are confined before anything under them is read:
// PERMISSION_DENIED naming the field for one outside the roots.
absl::Status CheckJobSpec(const JobSpecCheckContext& context, kforge::v1::JobSpec* spec);

}  // namespace kforge

#endif  // KFORGE_LEARNER_JOBS_JOB_SPEC_CHECK_H_
