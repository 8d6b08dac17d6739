// Loads a job's tasks from where TaskSetSpec points:
//  - a KernelBench folder: levelN/*.py are reference modules; an optional
//    solutions/levelN/<same name>.py is the task's reference solution;
//  - a KernelBook-shaped JSONL file: one object per line with `python_code`
//    (reference) and optionally `triton_code` (solution), `uuid` or
//    `entry_point` (name) and `level`;
//  - a built-in set: a KernelBench folder under the builtin root.
// then filters by levels and include/exclude globs.
//
//   KF_ASSIGN_OR_RETURN(std::vector<v1::Task> tasks, LoadTaskSet(spec.tasks(), builtin_root));
#ifndef KFORGE_LEARNER_TASKS_TASK_SET_H_
#define KFORGE_LEARNER_TASKS_TASK_SET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kforge/v1/task.pb.h"

namespace kforge {

// INVALID_ARGUMENT naming the path when the source is missing, malformed,
// or yields no task after filtering. Tasks come sorted by id.
absl::StatusOr<std::vector<kforge::v1::Task>> LoadTaskSet(const kforge::v1::TaskSetSpec& spec,
                                                          const std::string& builtin_root);

}  // namespace kforge

#endif  // KFORGE_LEARNER_TASKS_TASK_SET_H_
