#include "cli/local_job.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/client/rpc_client.h"
#include "common/grpc_status.h"
#include "common/config/json_config.h"
#include "kforge/v1/learner_state.pb.h"

namespace kforge {
namespace {

struct MeanAndSpread {
  double mean = 0;
  double stddev = 0;
};

// How long one JobService call may take.
constexpr absl::Duration kCallDeadline = absl::Seconds(10);

// The call's error as a status naming the call.
absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  const absl::Status status = FromGrpcStatus(s);
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

// Mean and sample standard deviation of v[from, to).
MeanAndSpread Summarize(const std::vector<double>& v, size_t from, size_t to) {
  MeanAndSpread out;
  if (to <= from) return out;
  const double n = static_cast<double>(to - from);
  for (size_t i = from; i < to; ++i) out.mean += v[i] / n;
  if (to - from < 2) return out;
  double squares = 0;
  for (size_t i = from; i < to; ++i) squares += (v[i] - out.mean) * (v[i] - out.mean);
  out.stddev = std::sqrt(squares / (n - 1));
  return out;
}

std::string Bar(int64_t step, int64_t total, int width) {
  const int filled = total <= 0 ? 0 : static_cast<int>(width * std::min(step, total) / total);
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
}

}  // namespace

v1::JobSpec DefaultLocalJob(const std::string& model_dir, bool gpu, uint64_t seed) {
  v1::JobSpec spec;
  spec.set_name("kforge-local");
  spec.set_model_path(model_dir);
  spec.mutable_tasks()->set_builtin("kforge-mini");
  spec.mutable_tasks()->set_solutions_dir(gpu ? "solutions" : "solutions-torch");
  spec.set_algorithm(v1::ALGORITHM_GRPO);
  spec.set_seed(seed);
  spec.mutable_sampling()->set_seed(seed);
  // A short warm start teaches the random tiny model the answer format and
  // most of each solution (its loss ends near 0.02 a token); sampled at
  // temperature 1, about one completion in six then passes, and GRPO raises
  // that share.
  spec.set_warm_start_steps(60);
  // ...or fewer on the CPU: the warm start ends once the mean loss of its
  // last five steps is below 0.045 (about 0.03 a token at that step). Where
  // it ends decides where GRPO starts: measured at 60 steps for three seeds,
  // a warm start that ended at 0.015 left GRPO's first steps at a reward of
  // 0.35 and little room (1.5x), one at 0.023 rose 3.1x and one at 0.052
  // 7.5x; with the rule, 2.9-3.8x (bench/RESULTS.md, issue 22). The Triton
  // solutions of the GPU job were not measured with it.
  if (!gpu) spec.mutable_sft()->set_stop_below_loss(0.045);
  // 150 GRPO steps, about 4 s each on 2 cores: the whole job ends in about
  // 11 minutes. Against 100 steps (bench/RESULTS.md, issue 22) every seed
  // measured ended higher (a mean reward of 0.39-0.56 over the last ten
  // steps against 0.12-0.38) and the seed whose warm start ended best rose
  // 1.5x instead of 1.1x.
  spec.set_total_steps(150);
  spec.set_prompts_per_step(4);
  spec.mutable_grpo()->set_group_size(8);
  // Dr. GRPO's advantages (Liu et al., 2025): the group mean subtracted,
  // no division by the group's spread, so a group that differs only in the
  // 0.1 format term does not weigh as much as one with a correct kernel.
  spec.mutable_grpo()->set_scale_by_std(false);
  spec.mutable_sampling()->set_temperature(1.0);
  // The reference solutions are under 150 tokens of the tiny tokenizer.
  spec.mutable_sampling()->set_max_new_tokens(200);
  // One schedule for the warm start and GRPO (2 warm-up steps, linear
  // decay to a tenth at the end), at a peak of 1e-2 for the warm start and
  // 5e-3 for GRPO. AdamW's second moments (beta2 0.999) still hold the warm
  // start's large gradients through all the GRPO steps, so a GRPO gradient,
  // several times smaller, moves the weights by a fraction of the nominal
  // rate: the warm start's moments act as a trust region (fresh moments for
  // the GRPO steps collapsed at once, even at 5e-4 to 1e-3). Measured
  // (issue 22, bench/RESULTS.md), last ten GRPO steps against the first ten:
  // 3e-4 1.2-1.4x; 3e-3 1.6x in 65 steps; 1e-2 1.5-7.5x, but in 2 of 13
  // seed runs the entropy rose and the reward fell to 0 for good (2e-2
  // collapsed within three steps); 5e-3 4.9-6.6x for seeds 0-2, rising
  // steadily with the entropy falling. A KL term (0.1, k3) against the
  // warm-started policy did not stop the collapse at 1e-2: it came sooner.
  v1::OptimizerParams* opt = spec.mutable_optimizer();
  opt->set_learning_rate(5e-3);
  spec.mutable_sft()->set_learning_rate(1e-2);
  opt->set_warmup_steps(2);
  opt->set_batch_size(32);
  opt->set_micro_batch_size(8);
  opt->set_bf16(gpu);
  v1::VerifierOptions* verifier = spec.mutable_verifier();
  verifier->set_require_triton(gpu);
  if (!gpu) {
    // Host-clock timings of PyTorch code on a busy 2-core machine are noise:
    // a speedup term would reward the noise (among correct samples it
    // decides the advantages), so the CPU job skips timing and its reward.
    verifier->mutable_timing()->set_enabled(false);
    spec.mutable_reward()->set_speedup_weight(0);
  }
  spec.mutable_checkpoint()->set_every_steps(20);
  // The next step's groups are sampled while a step trains; lookahead_steps
  // stays at its default 0 (none while a step collects), as tuned.
  spec.set_max_staleness(1);
  return spec;
}

v1::JobSpec ShortLocalJob(const std::string& model_dir, bool gpu, uint64_t seed) {
  v1::JobSpec spec = DefaultLocalJob(model_dir, gpu, seed);
  spec.set_name("kforge-local-short");
  // The whole warm start (all 60 steps, never ended early), then 10 GRPO
  // steps: periodic checkpoints, the final one and the curves are all
  // written. The learning rate decays over 70 steps instead of 210, so the
  // warm start ends at a higher loss (about 0.13 against 0.03) and the GRPO
  // steps earn little reward: this job shows the loop working, not learning.
  spec.mutable_sft()->clear_stop_below_loss();
  spec.set_total_steps(10);
  return spec;
}

LocalJobWatcher::LocalJobWatcher(const std::string& learner_address,
                                 const ChannelSecurity& security,
                                 absl::Duration log_stream_deadline)
    : stub_(v1::JobService::NewStub(security.Connect(learner_address))),
      log_stream_deadline_(log_stream_deadline),
      tty_(::isatty(1) != 0) {}

LocalJobWatcher::~LocalJobWatcher() { FinishLog(absl::ZeroDuration()); }

void LocalJobWatcher::FinishLog(absl::Duration grace) {
  {
    absl::MutexLock lock(&log_mu_);
    if (log_thread_.joinable()) log_mu_.AwaitWithTimeout(absl::Condition(&log_done_), grace);
    log_stopping_ = true;
    if (log_context_ != nullptr) log_context_->TryCancel();
  }
  if (log_thread_.joinable()) log_thread_.join();
}

void LocalJobWatcher::PrintAboveProgress(const std::string& line) {
  absl::MutexLock lock(&out_mu_);
  std::printf(tty_ ? "\r\x1b[Kkforge local: %s\n" : "kforge local: %s\n", line.c_str());
  std::fflush(stdout);
}

void LocalJobWatcher::FollowLog() {
  pthread_setname_np(pthread_self(), "kf-job-log");
  absl::Cleanup done = [this] {
    absl::MutexLock lock(&log_mu_);
    log_done_ = true;
  };
  int64_t printed_us = 0;  // the newest line printed: a replay repeats older ones
  while (true) {
    // Each stream ends at its deadline and the next replays the job's
    // buffer: a line is printed once, by its time.
    grpc::ClientContext context;
    SetDeadline(context, log_stream_deadline_);
    {
      absl::MutexLock lock(&log_mu_);
      if (log_stopping_) return;
      log_context_ = &context;
    }
    v1::WatchJobRequest request;
    request.set_job_id(job_id_);
    request.set_replay(true);
    std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = stub_->WatchJob(&context, request);
    bool ended = false;
    v1::JobEvent event;
    while (reader->Read(&event)) {
      if (event.has_log() && event.time_us() > printed_us) {
        printed_us = event.time_us();
        PrintAboveProgress(absl::StrCat("job log: ", event.log()));
      }
      ended = ended || event.state() == v1::JOB_SUCCEEDED || event.state() == v1::JOB_FAILED ||
              event.state() == v1::JOB_CANCELLED;
    }
    const grpc::Status status = reader->Finish();
    {
      absl::MutexLock lock(&log_mu_);
      log_context_ = nullptr;
      // A stream past its deadline is opened again. Otherwise the progress
      // line says why a job ended; the log is a side view, so a learner
      // gone or an error here ends it quietly.
      if (log_stopping_ || ended ||
          (!status.ok() && status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)) {
        return;
      }
    }
  }
}

absl::StatusOr<std::string> LocalJobWatcher::SubmitOrResume(const v1::JobSpec& spec) {
  v1::ListJobsRequest list;
  list.add_states(v1::JOB_RUNNING);
  list.add_states(v1::JOB_QUEUED);
  v1::ListJobsResponse unfinished;
  grpc::ClientContext list_context;
  SetDeadline(list_context, kCallDeadline);
  if (grpc::Status s = stub_->ListJobs(&list_context, list, &unfinished); !s.ok()) {
    return FromGrpc(s, "ListJobs");
  }
  if (unfinished.jobs_size() > 0) {
    // Newest first: the oldest unfinished job is the one the learner runs.
    job_id_ = unfinished.jobs(unfinished.jobs_size() - 1).id();
    std::printf("kforge local: picking up %s, left unfinished by an earlier run\n", job_id_.c_str());
    log_thread_ = std::thread([this] { FollowLog(); });
    return job_id_;
  }
  grpc::ClientContext context;
  SetDeadline(context, kCallDeadline);
  v1::Job job;
  if (grpc::Status s = stub_->SubmitJob(&context, spec, &job); !s.ok()) {
    return FromGrpc(s, "SubmitJob");
  }
  job_id_ = job.id();
  const std::string warm =
      spec.sft().stop_below_loss() > 0
          ? absl::StrFormat("up to %d warm-start steps (until the loss is below %g)",
                            spec.warm_start_steps(), spec.sft().stop_below_loss())
          : absl::StrFormat("%d warm-start steps", spec.warm_start_steps());
  std::printf("kforge local: submitted %s: %s on reference solutions, then %d GRPO steps on %s\n",
              job_id_.c_str(), warm.c_str(), spec.total_steps(),
              spec.tasks().builtin().empty() ? "the job's tasks" : spec.tasks().builtin().c_str());
  std::fflush(stdout);
  log_thread_ = std::thread([this] { FollowLog(); });
  return job_id_;
}

absl::StatusOr<bool> LocalJobWatcher::Poll() {
  v1::GetJobRequest request;
  request.set_job_id(job_id_);
  grpc::ClientContext context;
  SetDeadline(context, kCallDeadline);
  if (grpc::Status s = stub_->GetJob(&context, request, &job_); !s.ok()) {
    return FromGrpc(s, "GetJob");
  }
  const v1::JobProgress& p = job_.progress();
  const bool ended = job_.state() == v1::JOB_SUCCEEDED || job_.state() == v1::JOB_FAILED ||
                     job_.state() == v1::JOB_CANCELLED;
  if (p.step() != printed_step_ && p.step() > 0) {
    printed_step_ = p.step();
    // The learner says how long the warm start is: sft.stop_below_loss can
    // end it before spec.warm_start_steps.
    const bool warm = p.step() <= p.warm_start_steps();
    if (!warm) rewards_.push_back(p.mean_reward());
    const std::string head = absl::StrFormat("%s step %4d/%d  v%-4d", Bar(p.step(), p.total_steps(), 24),
                                             p.step(), p.total_steps(), p.policy_version());
    // Warm-start steps sample nothing: their figure is the supervised loss.
    const std::string line =
        warm ? absl::StrFormat("%s  warm start  loss %.3f", head, p.policy_loss())
             : absl::StrFormat(
                   "%s  grpo  reward %.3f  passed: static %3.0f%%  compile %3.0f%%  tiny %3.0f%%  "
                   "multi %3.0f%%  correct %3.0f%%  %.1f samples/s",
                   head, p.mean_reward(), 100 * p.pass_rates().static_pass(),
                   100 * p.pass_rates().compile_pass(), 100 * p.pass_rates().tiny_run_pass(),
                   100 * p.pass_rates().multi_input_pass(), 100 * p.pass_rates().correct(),
                   p.samples_per_second());
    // On a terminal one line updates in place; in a log, one line per step.
    absl::MutexLock lock(&out_mu_);
    std::printf(tty_ ? "\r%s\x1b[K" : "%s\n", line.c_str());
    std::fflush(stdout);
  }
  if (ended && tty_) {
    absl::MutexLock lock(&out_mu_);
    std::printf("\n");
  }
  return ended;
}

void LocalJobWatcher::PrintSummary() const {
  absl::MutexLock lock(&out_mu_);  // a late log line waits until the summary is out
  const v1::JobProgress& p = job_.progress();
  // The whole reward curve survives restarts in the final checkpoint.
  std::vector<double> curve = rewards_;
  v1::TrainerState state;
  if (!job_.last_checkpoint().empty()) {
    absl::StatusOr<std::string> json = ReadFileToString(
        (std::filesystem::path(job_.last_checkpoint()) / "trainer_state.json").string());
    if (json.ok() && ParseJsonMessage(*json, &state).ok()) {
      const int warm = static_cast<int>(p.warm_start_steps());
      curve.assign(state.reward_history().begin() + std::min(warm, state.reward_history_size()),
                   state.reward_history().end());
    }
  }
  const size_t window = std::max<size_t>(1, std::min<size_t>(10, curve.size() / 4));
  std::printf("\n%-28s %s\n", "job", job_.id().c_str());
  std::printf("%-28s %s%s%s\n", "state", v1::JobState_Name(job_.state()).c_str(),
              job_.message().empty() ? "" : ": ", job_.message().c_str());
  std::printf("%-28s %lld of %lld (policy version %lld)\n", "steps",
              static_cast<long long>(p.step()), static_cast<long long>(p.total_steps()),
              static_cast<long long>(p.policy_version()));
  if (!curve.empty()) {
    // The spread says how much of the change is step-to-step noise.
    const MeanAndSpread first = Summarize(curve, 0, window);
    const MeanAndSpread last = Summarize(curve, curve.size() - window, curve.size());
    std::printf("%-28s %.3f (sd %.3f) -> %.3f (sd %.3f)\n",
                absl::StrFormat("mean reward, first/last %zu", window).c_str(), first.mean,
                first.stddev, last.mean, last.stddev);
  }
  std::printf("%-28s %.0f%% correct, %.0f%% compiled\n", "last step",
              100 * p.pass_rates().correct(), 100 * p.pass_rates().compile_pass());
  // Every accepted sample, and where it went (JobProgress's ledger).
  std::printf("%-28s %lld accepted: %lld trained, %lld stale, %lld evaluated, %lld discarded "
              "(%lld groups re-issued, %lld dropped), %lld still out\n",
              "samples", static_cast<long long>(p.samples_accepted()),
              static_cast<long long>(p.samples_trained()),
              static_cast<long long>(p.samples_dropped_stale()),
              static_cast<long long>(p.samples_evaluated()),
              static_cast<long long>(p.samples_discarded()),
              static_cast<long long>(p.groups_reissued()), static_cast<long long>(p.groups_dropped()),
              static_cast<long long>(p.samples_out()));
  std::printf("%-28s %.0f s\n", "this run", absl::ToDoubleSeconds(absl::Now() - started_));
  std::printf("%-28s %s\n", "final checkpoint",
              job_.last_checkpoint().empty() ? "-" : job_.last_checkpoint().c_str());
  // The learner writes curves.svg into the job's folder, the one that holds
  // checkpoints/step-N/ (learner/checkpoint/training_checkpoint.h).
  if (!job_.last_checkpoint().empty()) {
    const std::filesystem::path curves =
        std::filesystem::path(job_.last_checkpoint()).parent_path().parent_path() / "curves.svg";
    std::error_code ec;
    if (std::filesystem::exists(curves, ec)) {
      std::printf("%-28s %s\n", "training curves", curves.c_str());
    }
    const std::filesystem::path png = std::filesystem::path(curves).replace_extension(".png");
    if (std::filesystem::exists(png, ec)) std::printf("%-28s %s\n", "", png.c_str());
  }
  std::fflush(stdout);
}

}  // namespace kforge
