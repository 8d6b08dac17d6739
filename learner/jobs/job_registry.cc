#include "learner/jobs/job_registry.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config/json_config.h"
#include "common/status_macros.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;
using kforge::v1::Job;
using kforge::v1::JobEvent;
using kforge::v1::JobState;

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

bool IsTerminal(JobState state) {
  return state == kforge::v1::JOB_SUCCEEDED || state == kforge::v1::JOB_FAILED ||
         state == kforge::v1::JOB_CANCELLED;
}

std::string JobsDir(const std::string& state_dir) {
  return (fs::path(state_dir) / "jobs").string();
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobRegistry>> JobRegistry::Create(Options options,
                                                                 LearnerMetrics* metrics) {
  const std::string dir = JobsDir(options.state_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(dir, ": cannot create: ", ec.message()));
  std::unique_ptr<JobRegistry> registry(new JobRegistry(std::move(options), metrics));
  absl::MutexLock lock(&registry->mu_);
  for (const fs::directory_entry& file : fs::directory_iterator(dir, ec)) {
    if (file.path().extension() != ".json") continue;
    KF_ASSIGN_OR_RETURN(std::string text, ReadFileToString(file.path().string()));
    Job job;
    if (absl::Status parsed = ParseJsonMessage(text, &job); !parsed.ok()) {
      return absl::DataLossError(absl::StrCat(file.path().string(), ": ", parsed.message()));
    }
    int64_t number = 0;
    if (job.id().size() > 4 && absl::SimpleAtoi(job.id().substr(4), &number)) {
      registry->next_id_ = std::max(registry->next_id_, number + 1);
    }
    Entry& entry = registry->jobs_[job.id()];
    entry.job = std::move(job);
  }
  registry->UpdateGauges();
  return registry;
}

absl::Status JobRegistry::Persist(const Job& job) const {
  return WriteFileAtomically((fs::path(JobsDir(options_.state_dir)) / (job.id() + ".json")).string(),
                             ToJson(job));
}

void JobRegistry::AppendEvent(Entry& entry, JobEvent event) {
  event.set_job_id(entry.job.id());
  event.set_time_us(NowMicros());
  event.set_state(entry.job.state());
  entry.events.emplace_back(entry.next_seq++, std::move(event));
  while (static_cast<int>(entry.events.size()) > options_.watch_buffer_events) {
    entry.events.pop_front();
  }
  changed_.SignalAll();
}

absl::Status JobRegistry::SetState(Entry& entry, JobState state, const std::string& message) {
  Job updated = entry.job;
  updated.set_state(state);
  if (!message.empty()) updated.set_message(message);
  if (state == kforge::v1::JOB_RUNNING) updated.set_started_at_us(NowMicros());
  if (IsTerminal(state)) updated.set_finished_at_us(NowMicros());
  KF_RETURN_IF_ERROR(Persist(updated));
  entry.job = std::move(updated);
  JobEvent event;
  event.set_state_changed(state);
  AppendEvent(entry, std::move(event));
  UpdateGauges();
  return absl::OkStatus();
}

void JobRegistry::UpdateGauges() {
  std::map<JobState, int> counts;
  for (const auto& [id, entry] : jobs_) ++counts[entry.job.state()];
  for (int s = kforge::v1::JOB_QUEUED; s <= kforge::v1::JOB_CANCELLED; ++s) {
    const auto state = static_cast<JobState>(s);
    metrics_->JobsInState(state).Set(counts[state]);
  }
}

void JobRegistry::FillQueuePositions(Job& job) const {
  if (job.state() != kforge::v1::JOB_QUEUED) {
    job.set_queue_position(0);
    return;
  }
  int ahead = 0;
  for (const auto& [id, entry] : jobs_) {
    if (id >= job.id()) break;
    if (entry.job.state() == kforge::v1::JOB_QUEUED ||
        entry.job.state() == kforge::v1::JOB_RUNNING) {
      ++ahead;
    }
  }
  job.set_queue_position(ahead);
}

absl::StatusOr<Job> JobRegistry::Submit(const kforge::v1::JobSpec& spec) {
  absl::MutexLock lock(&mu_);
  const auto queued = std::count_if(jobs_.begin(), jobs_.end(), [](const auto& item) {
    return item.second.job.state() == kforge::v1::JOB_QUEUED;
  });
  if (queued >= options_.max_queued_jobs) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "job queue is full (", queued, " queued, max_queued_jobs ", options_.max_queued_jobs, ")"));
  }
  Job job;
  job.set_id(absl::StrFormat("job-%06d", next_id_));
  *job.mutable_spec() = spec;
  if (job.spec().name().empty()) job.mutable_spec()->set_name(job.id());
  job.set_state(kforge::v1::JOB_QUEUED);
  job.set_created_at_us(NowMicros());
  job.mutable_progress()->set_total_steps(spec.total_steps());
  if (spec.algorithm() != kforge::v1::ALGORITHM_SFT) {
    job.mutable_progress()->set_warm_start_steps(spec.warm_start_steps());
  }
  KF_RETURN_IF_ERROR(Persist(job));
  ++next_id_;
  Entry& entry = jobs_[job.id()];
  entry.job = job;
  JobEvent event;
  event.set_state_changed(kforge::v1::JOB_QUEUED);
  AppendEvent(entry, std::move(event));
  UpdateGauges();
  FillQueuePositions(job);
  return job;
}

absl::StatusOr<Job> JobRegistry::Get(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  Job job = it->second.job;
  FillQueuePositions(job);
  return job;
}

std::vector<Job> JobRegistry::List(const std::vector<JobState>& states, int limit) const {
  absl::MutexLock lock(&mu_);
  std::vector<Job> out;
  for (auto it = jobs_.rbegin(); it != jobs_.rend() && static_cast<int>(out.size()) < limit; ++it) {
    const Job& job = it->second.job;
    if (!states.empty() && std::find(states.begin(), states.end(), job.state()) == states.end()) {
      continue;
    }
    out.push_back(job);
    FillQueuePositions(out.back());
  }
  return out;
}

absl::StatusOr<Job> JobRegistry::Cancel(const std::string& job_id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  Entry& entry = it->second;
  if (IsTerminal(entry.job.state())) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " has already ended (",
                                                      JobState_Name(entry.job.state()), ")"));
  }
  KF_RETURN_IF_ERROR(SetState(entry, kforge::v1::JOB_CANCELLED,
                              reason.empty() ? "cancelled by the user" : reason));
  return entry.job;
}

std::optional<Job> JobRegistry::StartNext() {
  absl::MutexLock lock(&mu_);
  for (auto& [id, entry] : jobs_) {
    if (entry.job.state() == kforge::v1::JOB_RUNNING) return std::nullopt;
  }
  for (auto& [id, entry] : jobs_) {
    if (entry.job.state() != kforge::v1::JOB_QUEUED) continue;
    if (!SetState(entry, kforge::v1::JOB_RUNNING, "").ok()) return std::nullopt;
    return entry.job;
  }
  return std::nullopt;
}

absl::Status JobRegistry::ReportProgress(const std::string& job_id,
                                         const kforge::v1::JobProgress& progress) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  *it->second.job.mutable_progress() = progress;
  JobEvent event;
  *event.mutable_progress() = progress;
  AppendEvent(it->second, std::move(event));
  return Persist(it->second.job);
}

absl::StatusOr<JobRegistry::Entry*> JobRegistry::FindLocked(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  return &it->second;
}

std::optional<Job> JobRegistry::Running() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, entry] : jobs_) {
    if (entry.job.state() == kforge::v1::JOB_RUNNING) return entry.job;
  }
  return std::nullopt;
}

absl::Status JobRegistry::ReportCheckpoint(const std::string& job_id, const std::string& path) {
  absl::MutexLock lock(&mu_);
  KF_ASSIGN_OR_RETURN(Entry* const entry, FindLocked(job_id));
  entry->job.set_last_checkpoint(path);
  JobEvent event;
  event.set_log(absl::StrCat("checkpoint written: ", path));
  AppendEvent(*entry, std::move(event));
  return Persist(entry->job);
}

absl::Status JobRegistry::ReportEval(const std::string& job_id,
                                     const kforge::v1::EvalReport& report) {
  absl::MutexLock lock(&mu_);
  KF_ASSIGN_OR_RETURN(Entry* const entry, FindLocked(job_id));
  JobEvent event;
  *event.mutable_eval() = report;
  AppendEvent(*entry, std::move(event));
  return absl::OkStatus();
}

absl::Status JobRegistry::Log(const std::string& job_id, const std::string& line) {
  absl::MutexLock lock(&mu_);
  KF_ASSIGN_OR_RETURN(Entry* const entry, FindLocked(job_id));
  JobEvent event;
  event.set_log(line);
  AppendEvent(*entry, std::move(event));
  return absl::OkStatus();
}

absl::Status JobRegistry::Finish(const std::string& job_id, JobState state,
                                 const std::string& message) {
  if (!IsTerminal(state)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Finish: ", JobState_Name(state), " is not a final state"));
  }
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  if (IsTerminal(it->second.job.state())) return absl::OkStatus();
  return SetState(it->second, state, message);
}

absl::StatusOr<JobRegistry::EventBatch> JobRegistry::WaitForEvents(const std::string& job_id,
                                                                   int64_t after_seq,
                                                                   absl::Duration timeout,
                                                                   bool replay) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" not found"));
  Entry& entry = it->second;
  EventBatch batch;
  if (after_seq <= 0) {
    // A new watcher starts from the current state, after the history it
    // asked for.
    if (replay) {
      for (const auto& [seq, event] : entry.events) batch.events.push_back(event);
    }
    JobEvent current;
    current.set_job_id(job_id);
    current.set_time_us(NowMicros());
    current.set_state(entry.job.state());
    current.set_state_changed(entry.job.state());
    batch.events.push_back(std::move(current));
    batch.last_seq = entry.next_seq - 1;
    batch.job_ended = IsTerminal(entry.job.state());
    return batch;
  }
  while (entry.next_seq - 1 <= after_seq && !IsTerminal(entry.job.state())) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) break;
  }
  if (!entry.events.empty() && entry.events.front().first > after_seq + 1) {
    JobEvent gap;
    gap.set_job_id(job_id);
    gap.set_time_us(NowMicros());
    gap.set_state(entry.job.state());
    gap.set_log(absl::StrCat(entry.events.front().first - after_seq - 1,
                             " events dropped: this watcher fell behind"));
    batch.events.push_back(std::move(gap));
  }
  for (const auto& [seq, event] : entry.events) {
    if (seq > after_seq) batch.events.push_back(event);
  }
  batch.last_seq = std::max(after_seq, entry.next_seq - 1);
  batch.job_ended = IsTerminal(entry.job.state());
  return batch;
}

}  // namespace kforge
