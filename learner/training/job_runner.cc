#include "learner/training/job_runner.h"

#include <pthread.h>

#include <optional>

namespace kforge {

// How often an idle runner looks for a queued job.
constexpr absl::Duration kIdlePoll = absl::Milliseconds(250);

JobRunner::JobRunner(TrainingRunDeps deps) : deps_(std::move(deps)) {
  deps_.stopping = [this] { return stop_.HasBeenNotified(); };
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "kf-trainer");
    Loop();
  });
}

JobRunner::~JobRunner() { Stop(); }

void JobRunner::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void JobRunner::Loop() {
  while (!stop_.HasBeenNotified()) {
    std::optional<v1::Job> job = deps_.jobs->Running();
    if (!job.has_value()) job = deps_.jobs->StartNext();
    if (!job.has_value()) {
      stop_.WaitForNotificationWithTimeout(kIdlePoll);
      continue;
    }
    RunOne(*job);
  }
}

void JobRunner::RunOne(const v1::Job& job) {
  const absl::Status status = RunTrainingJob(job, deps_);
  if (absl::IsAborted(status)) {
    log_.Info("job paused; it resumes at the next start", {{"job", job.id()}});
    return;  // stays RUNNING
  }
  deps_.groups->DropJob(job.id());
  deps_.weights->Clear();
  if (absl::IsCancelled(status)) {
    deps_.metrics->JobsFinished(v1::JOB_CANCELLED).Increment();
    log_.Info("job cancelled", {{"job", job.id()}});
    return;
  }
  const v1::JobState state = status.ok() ? v1::JOB_SUCCEEDED : v1::JOB_FAILED;
  if (absl::Status s = deps_.jobs->Finish(job.id(), state, std::string(status.message())); !s.ok()) {
    log_.Error("cannot record the job's end", {{"job", job.id()}, {"error", s.message()}});
  }
  deps_.metrics->JobsFinished(state).Increment();
  if (status.ok()) {
    log_.Info("job succeeded", {{"job", job.id()}});
  } else {
    log_.Error("job failed", {{"job", job.id()}, {"error", status.message()}});
  }
}

}  // namespace kforge
