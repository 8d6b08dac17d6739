// JobRunner: the learner's trainer thread ("kf-trainer"). Runs one job at a
// time: first a job left RUNNING by a learner that stopped (it resumes from
// its newest checkpoint), then queued jobs in submission order. A job ends
// SUCCEEDED, FAILED (with the reason) or, when the user cancels it, stays
// CANCELLED; its groups are dropped from the tracker and its weights
// unpublished.
//
//   JobRunner runner({.jobs = jobs, .groups = &groups, ...});   // starts the thread
//   ...
//   runner.Stop();   // at the next step boundary: checkpoint, the job stays RUNNING
#ifndef KFORGE_LEARNER_TRAINING_JOB_RUNNER_H_
#define KFORGE_LEARNER_TRAINING_JOB_RUNNER_H_

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/logging/logger.h"
#include "learner/training/training_run.h"

namespace kforge {

class JobRunner {
 public:
  // deps.stopping is ignored: the runner supplies its own.
  explicit JobRunner(TrainingRunDeps deps);
  ~JobRunner();  // Stop()
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  void Stop();

 private:
  void Loop();
  void RunOne(const v1::Job& job);

  TrainingRunDeps deps_;
  Logger log_{"learner"};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_TRAINING_JOB_RUNNER_H_
