// The job side of `kforge local`: the default job it submits (a short
// supervised warm start on the built-in task set's reference solutions, then
// GRPO against the real verifier funnel, sized for a 2-core machine without
// a GPU), picking up a job a previous `kforge local` left unfinished, and
// the live progress line and closing summary.
//
//   v1::JobSpec spec = DefaultLocalJob("/run/tiny-model", /*gpu=*/false);
//   LocalJobWatcher watcher(learner_address, security);
//   KF_ASSIGN_OR_RETURN(std::string id, watcher.SubmitOrResume(spec));
//   while (!watcher.Poll()) ...;   // prints progress; true once the job ended
//   watcher.PrintSummary();
//
// Beside the progress line, a "kf-job-log" thread follows the job's events
// (WatchJob) and prints its log lines as they come: where the warm start
// ended, the verifier warm-up's report, checkpoints written.
#ifndef KFORGE_CLI_LOCAL_JOB_H_
#define KFORGE_CLI_LOCAL_JOB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security/channel_security.h"
#include "kforge/v1/job.pb.h"
#include "kforge/v1/job_service.grpc.pb.h"

namespace kforge {

// The built-in demo job on `model_dir`. On a GPU machine the candidates are
// Triton kernels checked with the Triton reference solutions; without one
// they are plain PyTorch (require_triton off, "solutions-torch").
// `seed` is the job's seed (task order) and its sampling seed.
v1::JobSpec DefaultLocalJob(const std::string& model_dir, bool gpu, uint64_t seed = 0);

// The default job cut short (`kforge local --short`, what CI runs): the same
// shape (three services, a warm start, GRPO on the real funnel, checkpoints,
// the final one and the curves written) in a few minutes on two cores.
v1::JobSpec ShortLocalJob(const std::string& model_dir, bool gpu, uint64_t seed = 0);

class LocalJobWatcher {
 public:
  // `log_stream_deadline`: how long one WatchJob stream of the log follower
  // may last; it opens the next where one ends (a test shortens it).
  LocalJobWatcher(const std::string& learner_address, const ChannelSecurity& security,
                  absl::Duration log_stream_deadline = absl::Minutes(10));
  // Stops following the job's log (FinishLog with no grace).
  ~LocalJobWatcher();
  LocalJobWatcher(const LocalJobWatcher&) = delete;
  LocalJobWatcher& operator=(const LocalJobWatcher&) = delete;

  // The job a previous run left RUNNING or QUEUED, else `spec` submitted;
  // starts following its log.
  absl::StatusOr<std::string> SubmitOrResume(const v1::JobSpec& spec);
  // Reads the job, prints a progress line when its step moved; true once
  // it has ended. Errors talking to the learner are returned.
  absl::StatusOr<bool> Poll();
  // Once Poll said the job ended: waits up to `grace` for the log follower
  // to print the job's last lines (its stream ends where the job's events
  // do), then stops it. Without the wait, lines the learner logged just
  // before the end (a checkpoint, the warm-up's report) were lost when the
  // services stopped under a stream not yet read.
  void FinishLog(absl::Duration grace);
  // The end state, reward at the first and last RL steps, pass rates, time
  // and the final checkpoint.
  void PrintSummary() const;
  const v1::Job& job() const { return job_; }

 private:
  // The "kf-job-log" thread: WatchJob streams, one after another while the
  // job runs, each line printed once.
  void FollowLog();
  // Prints `line` above the progress line (which the next step redraws).
  void PrintAboveProgress(const std::string& line);

  std::unique_ptr<v1::JobService::Stub> stub_;
  const absl::Duration log_stream_deadline_;
  mutable absl::Mutex out_mu_;  // one writer of stdout at a time
  absl::Mutex log_mu_;
  grpc::ClientContext* log_context_ ABSL_GUARDED_BY(log_mu_) = nullptr;  // the open stream's
  bool log_stopping_ ABSL_GUARDED_BY(log_mu_) = false;
  bool log_done_ ABSL_GUARDED_BY(log_mu_) = false;  // FollowLog returned
  std::thread log_thread_;
  v1::Job job_;
  std::string job_id_;
  int64_t printed_step_ = -1;
  std::vector<double> rewards_;  // per RL step seen by this run
  absl::Time started_ = absl::Now();
  bool tty_ = false;
};

}  // namespace kforge

#endif  // KFORGE_CLI_LOCAL_JOB_H_
