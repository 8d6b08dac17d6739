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

namespace kforge {

struct JobSpecCheckContext {
  // Folder holding the built-in task sets (TaskSetSpec.builtin).
  std::string builtin_tasks_root;
};

// On success `spec` holds the effective spec (defaults filled in).
absl::Status CheckJobSpec(const JobSpecCheckContext& context, kforge::v1::JobSpec* spec);

}  // namespace kforge

#endif  // KFORGE_LEARNER_JOBS_JOB_SPEC_CHECK_H_
