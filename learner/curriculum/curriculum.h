// Curriculum: which training tasks each step draws, shifting from level-1
// tasks (single operators) to "upper" tasks (level >= 2: fusions,
// architectures) once the policy solves enough level-1 tasks. The numbers
// come from CurriculumSpec (proto/kforge/v1/job.proto), which must have its
// defaults applied (ApplyProtoDefaults).
//
//   KF_ASSIGN_OR_RETURN(std::unique_ptr<Curriculum> curriculum,
//                       Curriculum::Create(job.curriculum(), training_tasks, job.seed()));
//   for (const v1::Task* task : curriculum->Draw(job.prompts_per_step())) Issue(*task);
//   curriculum->Record(task, verdict.correct());   // each verified sample
//   curriculum->EndStep();                         // after each optimiser step
//   state.mutable_curriculum()->CopyFrom(curriculum->Save());  // checkpoint
//
// SHARE. Each pick is an upper task with probability level2_share():
// level2_share_start until the trigger, then rising linearly to
// level2_share_end over ramp_steps EndStep calls, then staying there. The
// trigger is the first Record after which the pass rate of the last `window`
// level-1 outcomes exceeds level1_pass_rate_trigger, with the window holding
// at least MinTriggerOutcomes(window) outcomes (a quarter of the window, at
// least 16, all of it when the window is smaller), so a few lucky samples do
// not start the ramp. Once triggered it never resets, even if the pass rate
// drops: the share never goes back.
//
// DRAW. Within a level, picks are uniform and a draw repeats no task until
// every task of that level has been drawn in it. When only one kind exists,
// every pick comes from it. Randomness is a std::mt19937_64 seeded with
// `seed`, mapped to indices and probabilities by our own code (not std
// distributions, whose outputs differ between standard libraries), so a seed
// gives the same draws everywhere. Tasks are held sorted by id, so the order
// they are passed in does not matter.
//
// SAVE / RESTORE. Save captures the window, the trigger step, the step
// count, the engine and per-task stats. Restore onto a curriculum created
// with the same spec and task set continues exactly: the next Draw returns
// what the saved one's would have. A state that names task ids not in the
// set is accepted and those stats are dropped (a task file removed between
// runs must not make a job unresumable); tasks the state does not name start
// at zero. Restore is all-or-nothing: on error nothing changes.
//
// Thread-safe.
#ifndef KFORGE_LEARNER_CURRICULUM_CURRICULUM_H_
#define KFORGE_LEARNER_CURRICULUM_CURRICULUM_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kforge/v1/job.pb.h"
#include "kforge/v1/learner_state.pb.h"
#include "kforge/v1/task.pb.h"

namespace kforge {

class Curriculum {
 public:
  // INVALID_ARGUMENT when `tasks` is empty, a task has level < 1 or an id
  // used twice, or window / ramp_steps is below 1.
  static absl::StatusOr<std::unique_ptr<Curriculum>> Create(const v1::CurriculumSpec& spec,
                                                            std::vector<v1::Task> tasks,
                                                            uint64_t seed);

  // Level-1 outcomes the window must hold before the trigger can fire.
  static int64_t MinTriggerOutcomes(int32_t window);

  // `n` tasks for the next step; pointers stay valid for the curriculum's
  // lifetime.
  std::vector<const v1::Task*> Draw(int n) ABSL_LOCKS_EXCLUDED(mu_);
  // One verified sample's outcome; matched to the set by id (unknown ids are
  // ignored).
  void Record(const v1::Task& task, bool correct) ABSL_LOCKS_EXCLUDED(mu_);
  // After each optimiser step: advances the ramp.
  void EndStep() ABSL_LOCKS_EXCLUDED(mu_);

  double level2_share() const ABSL_LOCKS_EXCLUDED(mu_);
  // Over the rolling window; 0 while it is empty.
  double level1_pass_rate() const ABSL_LOCKS_EXCLUDED(mu_);
  // -1 until the trigger fires.
  int64_t triggered_at_step() const ABSL_LOCKS_EXCLUDED(mu_);
  // Attempts and correct samples of every task, sorted by id.
  std::vector<v1::TaskSolveStats> task_stats() const ABSL_LOCKS_EXCLUDED(mu_);

  v1::CurriculumState Save() const ABSL_LOCKS_EXCLUDED(mu_);
  // INVALID_ARGUMENT, naming the field, for a state that cannot come from
  // Save: an rng_state that does not parse, a negative step, a trigger after
  // the step or below -1, a task with more correct samples than attempts. A
  // window longer than spec.window (saved under a larger one) keeps its
  // newest outcomes.
  absl::Status Restore(const v1::CurriculumState& state) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Curriculum(const v1::CurriculumSpec& spec, std::vector<v1::Task> tasks, uint64_t seed);

  double ShareLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double PassRateLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A uniform index in [0, n), n > 0.
  size_t UniformIndexLocked(size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True with probability p.
  bool BernoulliLocked(double p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const v1::CurriculumSpec spec_;
  const std::vector<v1::Task> tasks_;  // sorted by id
  absl::flat_hash_map<std::string, size_t> index_by_id_;
  std::vector<size_t> level1_;  // indices into tasks_
  std::vector<size_t> upper_;

  mutable absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  std::deque<bool> window_ ABSL_GUARDED_BY(mu_);  // oldest first
  int64_t window_correct_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t triggered_at_step_ ABSL_GUARDED_BY(mu_) = -1;
  std::vector<int64_t> attempts_ ABSL_GUARDED_BY(mu_);  // by index into tasks_
  std::vector<int64_t> correct_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_CURRICULUM_CURRICULUM_H_
