#include "learner/jobs/job_spec_check.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"
#include "learner/jobs/model_folder_check.h"
#include "learner/tasks/task_set.h"

namespace kforge {
namespace {

using kforge::v1::JobSpec;

absl::Status Prefixed(absl::string_view prefix, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

absl::Status CheckRelations(const JobSpec& spec) {
  const auto& opt = spec.optimizer();
  if (opt.micro_batch_size() > opt.batch_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.optimizer.micro_batch_size: ", opt.micro_batch_size(),
                     " is larger than spec.optimizer.batch_size ", opt.batch_size()));
  }
  if (spec.best_of_n().top_k() > spec.best_of_n().group_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.best_of_n.top_k: ", spec.best_of_n().top_k(),
                     " is larger than spec.best_of_n.group_size ", spec.best_of_n().group_size()));
  }
  if (spec.spare_groups_per_step() > spec.prompts_per_step()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.spare_groups_per_step: ", spec.spare_groups_per_step(),
                     " is larger than spec.prompts_per_step ", spec.prompts_per_step()));
  }
  const auto& curriculum = spec.curriculum();
  if (curriculum.level2_share_end() < curriculum.level2_share_start()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.curriculum.level2_share_end: ", curriculum.level2_share_end(),
        " is below spec.curriculum.level2_share_start ", curriculum.level2_share_start()));
  }
  const auto& reward = spec.reward();
  if (reward.speedup_log_min() >= reward.speedup_log_max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.reward.speedup_log_min: ", reward.speedup_log_min(),
                     " must be below spec.reward.speedup_log_max ", reward.speedup_log_max()));
  }
  if (spec.sft().stop_below_loss() > 0 &&
      (spec.algorithm() == kforge::v1::ALGORITHM_SFT || spec.warm_start_steps() == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.sft.stop_below_loss: ", spec.sft().stop_below_loss(),
        " ends a warm start early, and this job has none (it needs warm_start_steps > 0 and an "
        "RL algorithm)"));
  }
  const std::string& chat = spec.prompt().chat_format();
  if (chat != "chatml" && chat != "llama3" && chat != "plain") {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.prompt.chat_format: \"", chat, "\" is not one of chatml, llama3, plain"));
  }
  return absl::OkStatus();
}

absl::Status CheckTasks(const JobSpecCheckContext& context, const JobSpec& spec) {
  auto tasks = LoadTaskSet(spec.tasks(), context.builtin_tasks_root);
  if (!tasks.ok()) return Prefixed("spec.tasks", tasks.status());
  const bool needs_solutions =
      spec.algorithm() == kforge::v1::ALGORITHM_SFT || spec.warm_start_steps() > 0;
  if (needs_solutions &&
      std::none_of(tasks->begin(), tasks->end(),
                   [](const auto& task) { return !task.reference_solution().empty(); })) {
    return absl::InvalidArgumentError(
        "spec.tasks: supervised training (algorithm SFT or warm_start_steps > 0) needs reference "
        "solutions, and no task in the set has one");
  }
  for (const std::string& id : spec.tasks().heldout()) {
    if (std::none_of(tasks->begin(), tasks->end(),
                     [&](const auto& task) { return task.id() == id; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.tasks.heldout: task \"", id, "\" is not in the task set"));
    }
  }
  return absl::OkStatus();
}

// Replaces each path of the spec by its resolved form inside the roots.
absl::Status ConfinePaths(const JobPathRoots& roots, JobSpec* spec) {
  KF_ASSIGN_OR_RETURN(std::string model, roots.models.Confine("spec.model_path", spec->model_path()));
  KF_RETURN_IF_ERROR(roots.models.ConfineTree("spec.model_path", model));
  spec->set_model_path(model);
  kforge::v1::TaskSetSpec* tasks = spec->mutable_tasks();
  if (tasks->has_kernelbench_dir()) {
    KF_ASSIGN_OR_RETURN(std::string dir, roots.tasks.Confine("spec.tasks.kernelbench_dir",
                                                             tasks->kernelbench_dir()));
    KF_RETURN_IF_ERROR(roots.tasks.ConfineTree("spec.tasks.kernelbench_dir", dir));
    tasks->set_kernelbench_dir(dir);
  } else if (tasks->has_kernelbook_jsonl()) {
    KF_ASSIGN_OR_RETURN(std::string file, roots.tasks.Confine("spec.tasks.kernelbook_jsonl",
                                                              tasks->kernelbook_jsonl()));
    tasks->set_kernelbook_jsonl(file);
  }
  if (!spec->checkpoint().dir().empty()) {
    // Relative to the state folder, as the trainer takes it.
    KF_ASSIGN_OR_RETURN(std::string dir,
                        roots.outputs.Confine("spec.checkpoint.dir", spec->checkpoint().dir(),
                                              roots.state_dir));
    spec->mutable_checkpoint()->set_dir(dir);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJobSpec(const JobSpecCheckContext& context, JobSpec* spec) {
  KF_RETURN_IF_ERROR(FinalizeConfig(spec, "spec"));
  KF_RETURN_IF_ERROR(CheckRelations(*spec));
  if (context.roots != nullptr) KF_RETURN_IF_ERROR(ConfinePaths(*context.roots, spec));
  KF_RETURN_IF_ERROR(Prefixed("spec.model_path", CheckModelFolder(spec->model_path()).status()));
  return CheckTasks(context, *spec);
}

}  // namespace kforge
