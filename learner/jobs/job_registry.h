// The learner's table of jobs: submission order, states, progress and the
// event log that WatchJob streams. Every change is written to
// `<state_dir>/jobs/<id>.json` before it becomes visible, so the table
// survives a learner restart. Thread-safe.
//
//   KF_ASSIGN_OR_RETURN(auto registry, JobRegistry::Create(options, &metrics));
//   KF_ASSIGN_OR_RETURN(v1::Job job, registry->Submit(checked_spec));
//   auto batch = registry->WaitForEvents(job.id(), /*after_seq=*/0, absl::Seconds(1));
//
// Lifecycle: QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED; a queued
// job can be cancelled directly. One job runs at a time (StartNext).
#ifndef KFORGE_LEARNER_JOBS_JOB_REGISTRY_H_
#define KFORGE_LEARNER_JOBS_JOB_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kforge/v1/job.pb.h"
#include "learner/learner_metrics.h"

namespace kforge {

class JobRegistry {
 public:
  struct Options {
    std::string state_dir;
    int max_queued_jobs = 64;
    int watch_buffer_events = 1024;
  };

  // Loads the jobs already in state_dir.
  static absl::StatusOr<std::unique_ptr<JobRegistry>> Create(Options options,
                                                             LearnerMetrics* metrics);

  // `spec` must have passed CheckJobSpec. RESOURCE_EXHAUSTED when the queue
  // is full.
  absl::StatusOr<kforge::v1::Job> Submit(const kforge::v1::JobSpec& spec);
  absl::StatusOr<kforge::v1::Job> Get(const std::string& job_id) const;
  // Newest first.
  std::vector<kforge::v1::Job> List(const std::vector<kforge::v1::JobState>& states,
                                    int limit) const;
  // FAILED_PRECONDITION if the job has already ended.
  absl::StatusOr<kforge::v1::Job> Cancel(const std::string& job_id, const std::string& reason);

  // For the trainer: marks the oldest queued job RUNNING and returns it.
  std::optional<kforge::v1::Job> StartNext();
  // The job left RUNNING by a learner that stopped (to resume), if any.
  std::optional<kforge::v1::Job> Running() const;
  absl::Status ReportProgress(const std::string& job_id, const kforge::v1::JobProgress& progress);
  // Records the newest checkpoint and says so in the job's events.
  absl::Status ReportCheckpoint(const std::string& job_id, const std::string& path);
  absl::Status ReportEval(const std::string& job_id, const kforge::v1::EvalReport& report);
  // A line for the job's watchers ("resumed from ...").
  absl::Status Log(const std::string& job_id, const std::string& line);
  absl::Status Finish(const std::string& job_id, kforge::v1::JobState state,
                      const std::string& message);

  struct EventBatch {
    std::vector<kforge::v1::JobEvent> events;
    int64_t last_seq = 0;   // pass as after_seq next time
    bool job_ended = false;  // no more events will come
  };
  // Events after `after_seq`, waiting up to `timeout` for the first.
  // after_seq 0 starts a new watcher: the current state, preceded with
  // `replay` by every event still buffered. NOT_FOUND for an unknown job.
  absl::StatusOr<EventBatch> WaitForEvents(const std::string& job_id, int64_t after_seq,
                                           absl::Duration timeout, bool replay = false);

 private:
  struct Entry {
    kforge::v1::Job job;
    std::deque<std::pair<int64_t, kforge::v1::JobEvent>> events;
    int64_t next_seq = 1;
  };

  JobRegistry(Options options, LearnerMetrics* metrics) : options_(std::move(options)), metrics_(metrics) {}
  absl::Status Persist(const kforge::v1::Job& job) const;
  // NOT_FOUND naming the job when it is unknown.
  absl::StatusOr<Entry*> FindLocked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AppendEvent(Entry& entry, kforge::v1::JobEvent event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SetState(Entry& entry, kforge::v1::JobState state, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateGauges() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillQueuePositions(kforge::v1::Job& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  LearnerMetrics* const metrics_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  // Ordered by id, which orders by submission.
  std::map<std::string, Entry> jobs_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace kforge

#endif  // KFORGE_LEARNER_JOBS_JOB_REGISTRY_H_
