#include "learner/training/training_run.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>
#include <sstream>

#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/config/json_config.h"
#include "common/logging/logger.h"
#include "common/status_macros.h"
#include "eval/eval_metrics.h"
#include "learner/checkpoint/training_checkpoint.h"
#include "learner/curriculum/curriculum.h"
#include "prompts/task_prompt.h"
#include "prompts/trajectory_end.h"
#include "learner/training/curves_files.h"
#include "learner/tasks/task_set.h"
#include "learner/training/policy_trainer.h"
#include "learner/rollout/eval_round.h"
#include "learner/rollout/offer_window.h"
#include "learner/rollout/seed_batch.h"
#include "learner/rollout/warm_up_round.h"
#include "learner/training/sample_log.h"
#include "learner/training/step_batches.h"
#include "learner/timing/step_timer.h"
#include "model/policy_loader.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/torch_runtime.h"
#include "model/transformer/decoder_model.h"
#include "model/transformer/torch_status.h"
#include "model/weights/flat_parameters.h"
#include "model/weights/weight_stream.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

bool IsHeldOut(const v1::Task& task, const v1::TaskSetSpec& spec) {
  return std::find(spec.heldout().begin(), spec.heldout().end(), task.id()) != spec.heldout().end();
}

std::string RandomNonce() {
  std::random_device device;
  return absl::StrFormat("%06x", device() & 0xffffff);
}

// Copies `from`'s parameters into `to`, a model of the same configuration.
absl::Status CopyParameters(DecoderModel& from, DecoderModel& to) {
  std::vector<std::pair<std::string, at::Tensor>> src = from.NamedParameters();
  std::vector<std::pair<std::string, at::Tensor>> dst = to.NamedParameters();
  if (src.size() != dst.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the reference has ", dst.size(), " parameters, the policy ", src.size()));
  }
  return TorchCall("copy the policy into the reference", [&] {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < src.size(); ++i) {
      TORCH_CHECK(src[i].first == dst[i].first, "parameter ", i, " is ", src[i].first,
                  " in the policy and ", dst[i].first, " in the reference");
      dst[i].second.copy_(src[i].second);
    }
    return absl::OkStatus();
  });
}

class TrainingRun {
 public:
  TrainingRun(const v1::Job& job, const TrainingRunDeps& deps)
      : job_(job), spec_(job.spec()), deps_(deps), nonce_(RandomNonce()) {}
  // The broadcaster lets go of the policy's flat parameters before they go.
  ~TrainingRun() {
    if (flat_ != nullptr) deps_.broadcaster->SetSource(nullptr);
  }

  absl::Status Run() {
    KF_RETURN_IF_ERROR(Setup());
    KF_RETURN_IF_ERROR(OfferWarmUps());
    while (trainer_->step() < TotalSteps()) {
      KF_RETURN_IF_ERROR(CheckInterrupt());
      const absl::Time started = absl::Now();
      const bool supervised =
          trainer_->step() < WarmStartSteps() || spec_.algorithm() == v1::ALGORITHM_SFT;
      if (!supervised) KF_RETURN_IF_ERROR(MaybeTakeWarmStartReference());

      KF_RETURN_IF_ERROR(supervised ? SupervisedStep(started) : RolloutStep(started));
      KF_RETURN_IF_ERROR(MaybeStartEval());
      if (trainer_->step() % spec_.checkpoint().every_steps() == 0) {
        KF_RETURN_IF_ERROR(Checkpoint());
      }
    }
    if (state_.step() != last_checkpoint_step_) KF_RETURN_IF_ERROR(Checkpoint());
    if (!carried_.empty()) {
      // The offering's cap should leave none; the tracker's ledger has them
      // as completed, and this says where they went.
      log_.Warning("complete groups left untrained at the job's end",
                   {{"job", job_.id()}, {"groups", carried_.size()}, {"samples", CarriedSamples()}});
    }
    KF_RETURN_IF_ERROR(FlushRounds());
    // The ledger final, with the last evaluation's samples in it. The job
    // trained whatever this report meets: a failure is a warning.
    v1::JobProgress progress = last_progress_;
    FillLedger(&progress);
    if (absl::Status s = deps_.jobs->ReportProgress(job_.id(), progress); !s.ok()) {
      log_.Warning("cannot report the job's final sample ledger",
                   {{"job", job_.id()}, {"error", s.message()}});
    }
    return absl::OkStatus();
  }

  // After a stop or a failure: the newest state on disk, when it moved.
  void CheckpointOnExit() {
    if (trainer_ == nullptr || state_.step() == last_checkpoint_step_) return;
    if (absl::Status s = Checkpoint(); !s.ok()) {
      log_.Error("checkpoint on exit failed", {{"job", job_.id()}, {"error", s.message()}});
    }
  }

 private:
  absl::Status Setup();
  // progress's ledger of accepted samples (JobProgress.samples_accepted,
  // samples_trained ... samples_out) and group counts, from one tracker
  // snapshot.
  void FillLedger(v1::JobProgress* progress) const;
  // Samples of the complete groups carried to a later step.
  int64_t CarriedSamples() const;
  absl::Status CheckInterrupt();
  // The warm start's length: spec.warm_start_steps, or the step at which
  // sft.stop_below_loss ended it.
  int64_t WarmStartSteps() const {
    return state_.warm_start_ended_at() > 0 ? state_.warm_start_ended_at()
                                            : spec_.warm_start_steps();
  }
  // Steps of the whole job: an SFT job's total_steps, else the warm start's
  // then total_steps RL steps.
  int64_t TotalSteps() const {
    return spec_.algorithm() == v1::ALGORITHM_SFT ? spec_.total_steps()
                                                  : WarmStartSteps() + spec_.total_steps();
  }
  // After a warm-start step: ends the warm start when the mean loss of the
  // last sft.stop_window_steps steps fell below sft.stop_below_loss, which
  // moves the job's end (TotalSteps) and so the schedule's.
  absl::Status MaybeEndWarmStart();
  // Before the first RL step of a job with a warm start and a KL term: the
  // reference becomes the policy as the warm start left it (and is saved,
  // WriteReferenceModel), as SFT-then-RL recipes measure the KL against the
  // SFT model; the job's model_path, random or a base model the warm start
  // moved away from, would pull the policy back from what it learned.
  absl::Status MaybeTakeWarmStartReference();
  absl::Status SupervisedStep(absl::Time started);
  absl::Status RolloutStep(absl::Time started);
  absl::StatusOr<std::vector<CompletedGroup>> CollectGroups();
  // What the step being collected may keep out: its own groups and up to
  // lookahead_steps later steps' (learner/rollout/offer_window.h).
  OfferWindow StepOfferWindow() const;
  // Whether every sample of `group` came from policy `version` or later.
  static bool SampledSince(const CompletedGroup& group, int64_t version);
  bool TooStale(const CompletedGroup& group) const;
  // Every training group of the job not yet trained on is in the tracker,
  // the batch (`batch` of them) or carried_, counted once (a group
  // completing meanwhile is still the tracker's until RouteCompleted takes
  // it). Counted as supply only if it can still be trained on from version
  // `usable_from` on, else as older: a group offered (or sampled) before it
  // would be dropped as too stale when its turn came, so counting it would
  // leave that step a group short, waiting for one offered only then (on 4
  // GPUs every step lost a group round so).
  GroupsOut CountGroupsOut(int64_t usable_from, int64_t batch) const;
  absl::Status OfferGroups(int64_t count);
  // Before a warm start that RL steps follow (JobSpec.warm_up_verifiers):
  // one verifier warm-up per training task with a reference solution.
  absl::Status OfferWarmUps();
  void TakeWarmUp(CompletedGroup group);
  // A group of `task` for the rollout workers: the job's prompt, rendered
  // and tokenised, its sampling and verifier options, the current version.
  absl::StatusOr<v1::WorkItem> MakeWorkItem(const v1::Task& task, std::string group_id,
                                            int32_t group_size) const;
  // Publishes new weights when the step updated the policy, records the
  // step (its times from `timer`, closed here) and reports progress.
  absl::Status FinishStep(const TrainStepStats& stats, v1::JobProgress progress,
                          LearnerMetrics::StepFigures figures, absl::Time started,
                          StepTimer timer);
  absl::Status Publish();
  absl::Status Checkpoint();
  // <job_dir_>/curves.svg (and curves.png) from state_'s histories; a
  // failure is a warning: the plot is for people, the job does not depend on it.
  void WriteCurves();
  // Held-out evaluation: a round of one group per held-out task every
  // eval.every_steps steps; summarised (eval/eval_metrics) once all are back.
  absl::Status MaybeStartEval();
  void TakeEvalGroup(CompletedGroup group);
  void FinishEval();
  // Complete groups the tracker holds: evaluation ones to the round, the
  // rest carried to the next RL step.
  void RouteCompleted(absl::Duration wait);
  // At the job's end: waits (up to group_timeout_s, and while the tracker
  // still has them) for the last held-out round and for warm-ups still out
  // (a short job's RL steps, whose candidates fail fast, can end before the
  // warm-ups' reference runs do), then summarises each with what came back.
  absl::Status FlushRounds();
  void LogWarmUpSummary();

  const v1::Job job_;
  const v1::JobSpec spec_;
  const TrainingRunDeps deps_;
  const std::string nonce_;  // keeps group ids unique across learner restarts
  Logger log_{"learner"};
  std::vector<v1::Task> train_tasks_;
  std::unique_ptr<LoadedPolicy> policy_;
  std::unique_ptr<LoadedPolicy> reference_;
  bool reference_from_warm_start_ = false;  // reference_ holds the warm start's end
  // The policy's parameters as flat buffers, for the NCCL weight broadcast.
  std::unique_ptr<FlatParameters> flat_;
  std::unique_ptr<PolicyTrainer> trainer_;
  std::unique_ptr<Curriculum> curriculum_;
  v1::TrainerState state_;
  fs::path job_dir_;
  fs::path source_model_dir_;
  int64_t last_checkpoint_step_ = -1;
  bool png_note_logged_ = false;
  int64_t group_counter_ = 0;
  int32_t eos_ = 0;
  std::vector<v1::Task> heldout_tasks_;
  // The held-out evaluation round in flight (JobSpec.eval): its step, the
  // groups it offered and those back.
  EvalRound eval_;
  WarmUpRound warm_up_;
  std::vector<CompletedGroup> carried_;  // complete groups beyond the last step's need
  // The ledger of JobProgress (FillLedger): samples dropped as too old,
  // taken into RL steps and back from evaluations by this run, and the
  // tracker's counts when it began (the tracker outlives jobs).
  int64_t stale_samples_ = 0;
  int64_t trained_samples_ = 0;
  int64_t evaluated_samples_ = 0;
  GroupTracker::Stats tracker_at_start_;
  absl::Time last_step_end_ = absl::InfiniteFuture();  // of the last RL step
  absl::Time last_any_step_end_ = absl::InfiniteFuture();  // of the last step of any kind
  v1::JobProgress last_progress_;
};

absl::Status TrainingRun::Setup() {
  tracker_at_start_ = deps_.groups->stats();
  KF_ASSIGN_OR_RETURN(std::vector<v1::Task> tasks,
                      LoadTaskSet(spec_.tasks(), deps_.config->builtin_tasks_dir()));
  for (v1::Task& task : tasks) {
    (IsHeldOut(task, spec_.tasks()) ? heldout_tasks_ : train_tasks_).push_back(std::move(task));
  }
  if (train_tasks_.empty()) return absl::FailedPreconditionError("every task is held out");
  job_dir_ = spec_.checkpoint().dir().empty()
                 ? fs::path(deps_.config->state_dir()) / "jobs" / job_.id()
                 : fs::path(spec_.checkpoint().dir()).is_absolute()
                       ? fs::path(spec_.checkpoint().dir())
                       : fs::path(deps_.config->state_dir()) / spec_.checkpoint().dir();
  KF_ASSIGN_OR_RETURN(std::optional<std::string> latest, LatestCheckpoint(job_dir_));
  source_model_dir_ = latest.has_value() ? fs::path(*latest) : fs::path(spec_.model_path());
  std::string device = deps_.config->device();
  if (device == "auto") device = DescribeTorchRuntime().cuda_available ? "cuda:0" : "cpu";
  const bool gpu = device.rfind("cuda", 0) == 0;
  const std::string dtype = gpu && spec_.optimizer().bf16() ? "bfloat16" : "float32";
  KF_ASSIGN_OR_RETURN(policy_, LoadPolicy(source_model_dir_.string(), device, dtype));
  if (spec_.grpo().kl_coef() > 0 && spec_.algorithm() == v1::ALGORITHM_GRPO) {
    // Resumed after the warm start: the reference it saved. Otherwise the
    // job's model, replaced when the RL steps begin if a warm start precedes them.
    const std::optional<std::string> saved =
        spec_.warm_start_steps() > 0 && latest.has_value() ? ReferenceModel(job_dir_) : std::nullopt;
    reference_from_warm_start_ = saved.has_value();
    KF_ASSIGN_OR_RETURN(reference_, LoadPolicy(saved.value_or(spec_.model_path()), device, dtype));
  }
  if (deps_.broadcaster != nullptr && deps_.broadcaster->NotMemberReason().empty()) {
    // Before the optimiser exists: it then holds the re-homed tensors.
    KF_ASSIGN_OR_RETURN(flat_, FlatParameters::Create(policy_->model.get()));
    deps_.broadcaster->SetSource(flat_.get());
  }
  const std::vector<int64_t>& eos = policy_->model->config().eos_token_ids;
  std::optional<int32_t> im_end = policy_->tokenizer->TokenId("<|im_end|>");
  eos_ = !eos.empty() ? static_cast<int32_t>(eos.front()) : im_end.value_or(0);
  PolicyTrainerOptions options{
      .optimizer = spec_.optimizer(),
      .schedule = {.peak = spec_.optimizer().learning_rate(),
                   .warmup_steps = spec_.optimizer().warmup_steps(),
                   .total_steps = TotalSteps(),
                   .min_lr_ratio = spec_.optimizer().min_lr_ratio()},
      .temperature = spec_.sampling().temperature()};
  KF_ASSIGN_OR_RETURN(trainer_, PolicyTrainer::Create(policy_->model.get(),
                                                      reference_ ? reference_->model.get() : nullptr,
                                                      options));
  KF_ASSIGN_OR_RETURN(curriculum_, Curriculum::Create(spec_.curriculum(), train_tasks_, spec_.seed()));
  state_.set_job_id(job_.id());
  if (latest.has_value()) {
    KF_ASSIGN_OR_RETURN(state_, ReadTrainerState(*latest));
    KF_RETURN_IF_ERROR(LoadOptimizerState(*latest, state_, trainer_->optimizer()));
    KF_RETURN_IF_ERROR(curriculum_->Restore(state_.curriculum()));
    trainer_->set_step(state_.step());
    // Where a warm start that ended early moved it.
    trainer_->set_schedule_total_steps(TotalSteps());
    last_checkpoint_step_ = state_.step();
    last_progress_ = job_.progress();
    KF_RETURN_IF_ERROR(deps_.jobs->Log(
        job_.id(), absl::StrCat("resumed from ", *latest, " at step ", state_.step(),
                                ", policy version ", state_.policy_version())));
  }
  deps_.groups->SetJobBounds({.group_timeout = absl::Seconds(spec_.group_timeout_s()),
                              .max_staleness = spec_.max_staleness(),
                              .wait_factor = spec_.group_wait_factor(),
                              .wait_floor = absl::Seconds(spec_.group_wait_floor_s()),
                              .min_observed = spec_.group_wait_min_observed()});
  log_.Info("job running", {{"job", job_.id()}, {"model", source_model_dir_.string()},
                            {"policy", policy_->description}, {"tasks", train_tasks_.size()},
                            {"step", state_.step()}, {"total_steps", TotalSteps()}});
  return Publish();
}

absl::Status TrainingRun::CheckInterrupt() {
  if (deps_.stopping()) return absl::AbortedError("the learner is stopping");
  absl::StatusOr<v1::Job> job = deps_.jobs->Get(job_.id());
  if (!job.ok() || job->state() == v1::JOB_CANCELLED) {
    return absl::CancelledError("the job was cancelled");
  }
  return absl::OkStatus();
}

absl::Status TrainingRun::SupervisedStep(absl::Time started) {
  const int64_t count = std::min<int64_t>(spec_.optimizer().batch_size(),
                                          std::max<size_t>(1, train_tasks_.size()));
  // Revision turns only where the RL steps will ask for them.
  const double follow_up_share = IsMultiTurn(spec_.multi_turn()) ? spec_.sft().follow_up_share() : 0;
  KF_ASSIGN_OR_RETURN(std::vector<TrainSequence> batch,
                      SupervisedSequences(train_tasks_, spec_.prompt(), *policy_->tokenizer, eos_,
                                          trainer_->step() * count, count, follow_up_share,
                                          spec_.multi_turn().feedback_max_chars()));
  const double sft_rate = spec_.sft().learning_rate();
  const double scale = sft_rate > 0 ? sft_rate / spec_.optimizer().learning_rate() : 1.0;
  StepTimer timer;
  const absl::Time train_start = absl::Now();
  KF_ASSIGN_OR_RETURN(TrainStepStats stats,
                      trainer_->Step(batch, {.objective = Objective::kSupervised,
                                             .learning_rate_scale = scale}));
  timer.AddTraining(absl::Now() - train_start, stats.tokens);
  return FinishStep(stats, last_progress_, {}, started, std::move(timer));
}

absl::Status TrainingRun::MaybeEndWarmStart() {
  const v1::SftParams& sft = spec_.sft();
  const int64_t step = state_.step();
  const int window = sft.stop_window_steps();
  if (spec_.algorithm() == v1::ALGORITHM_SFT || sft.stop_below_loss() <= 0 ||
      state_.warm_start_ended_at() > 0 || step >= spec_.warm_start_steps() || step < window ||
      state_.loss_history_size() < window) {
    return absl::OkStatus();
  }
  const auto& losses = state_.loss_history();
  const double mean = std::accumulate(losses.end() - window, losses.end(), 0.0) / window;
  // Written so that a non-finite loss in the window (a skipped update)
  // never ends it.
  if (!(mean < sft.stop_below_loss())) return absl::OkStatus();
  state_.set_warm_start_ended_at(step);
  trainer_->set_schedule_total_steps(TotalSteps());
  log_.Info("warm start ended early",
            {{"job", job_.id()}, {"step", step}, {"mean_loss", mean},
             {"stop_below_loss", sft.stop_below_loss()}, {"window", window},
             {"rl_steps_from_here", spec_.total_steps()}});
  return deps_.jobs->Log(
      job_.id(), absl::StrFormat("warm start ended at step %d of at most %d: mean loss %.4g of the "
                                 "last %d steps is below sft.stop_below_loss %.4g; %d RL steps follow",
                                 step, spec_.warm_start_steps(), mean, window,
                                 sft.stop_below_loss(), spec_.total_steps()));
}

absl::Status TrainingRun::MaybeTakeWarmStartReference() {
  if (reference_ == nullptr || reference_from_warm_start_ || spec_.warm_start_steps() <= 0) {
    return absl::OkStatus();
  }
  KF_RETURN_IF_ERROR(CopyParameters(*policy_->model, *reference_->model));
  KF_ASSIGN_OR_RETURN(std::string dir,
                      WriteReferenceModel({.job_dir = job_dir_,
                                           .source_model_dir = source_model_dir_,
                                           .spec = spec_.checkpoint()},
                                          *reference_->model));
  reference_from_warm_start_ = true;
  log_.Info("KL reference taken", {{"job", job_.id()}, {"step", trainer_->step()}, {"dir", dir}});
  // Later than the warm start's end only when a restart came between that
  // end and the save (the policy it left was not kept): said, not hidden.
  const std::string where =
      trainer_->step() == WarmStartSteps()
          ? std::string("where the warm start ended")
          : absl::StrFormat("the first RL step after a restart; the warm start ended at step %d "
                            "and its policy had not been saved",
                            WarmStartSteps());
  return deps_.jobs->Log(job_.id(),
                         absl::StrFormat("the KL term's reference is the policy at step %d, %s "
                                         "(saved in %s)",
                                         trainer_->step(), where, dir));
}

absl::Status TrainingRun::OfferGroups(int64_t count) {
  const int32_t group_size = spec_.algorithm() == v1::ALGORITHM_BEST_OF_N
                                 ? spec_.best_of_n().group_size()
                                 : spec_.grpo().group_size();
  std::vector<v1::WorkItem> items;
  for (const v1::Task* task : curriculum_->Draw(static_cast<int>(count))) {
    KF_ASSIGN_OR_RETURN(v1::WorkItem item,
                        MakeWorkItem(*task, absl::StrFormat("g%06d-%s", group_counter_++, nonce_),
                                     group_size));
    items.push_back(std::move(item));
  }
  // Offered together, so the rollout workers waiting share them.
  return deps_.groups->Offer(std::move(items));
}

absl::StatusOr<v1::WorkItem> TrainingRun::MakeWorkItem(const v1::Task& task, std::string group_id,
                                                       int32_t group_size) const {
  v1::WorkItem item;
  item.set_job_id(job_.id());
  item.set_group_id(std::move(group_id));
  *item.mutable_task() = task;
  KF_ASSIGN_OR_RETURN(std::string prompt, RenderTaskPrompt(spec_.prompt(), task));
  for (int32_t id : policy_->tokenizer->Encode(prompt)) item.add_prompt_tokens(id);
  item.set_prompt_text(std::move(prompt));
  item.set_group_size(group_size);
  *item.mutable_sampling() = spec_.sampling();
  *item.mutable_verifier() = spec_.verifier();
  item.set_min_policy_version(state_.policy_version());
  // Named from the RL steps done (negative during the warm start: the
  // first RL steps' batch, which the warm-ups ready).
  const SeedBatch batch = SeedBatchAt(job_.id(), trainer_->step() - WarmStartSteps(),
                                      spec_.verifier().multi_input().seed_rotation_versions());
  item.set_batch_id(batch.id);
  item.set_next_batch_id(batch.next_id);
  // The worker renders follow-up turns from these; evaluation groups
  // (MaybeStartEval) clear them again and stay single-turn.
  if (IsMultiTurn(spec_.multi_turn())) {
    *item.mutable_multi_turn() = spec_.multi_turn();
    *item.mutable_prompt() = spec_.prompt();
  }
  return item;
}

absl::Status TrainingRun::OfferWarmUps() {
  if (!spec_.warm_up_verifiers() || spec_.algorithm() == v1::ALGORITHM_SFT ||
      trainer_->step() >= WarmStartSteps()) {
    return absl::OkStatus();
  }
  std::vector<v1::WorkItem> items;
  std::vector<std::string> task_ids;
  for (const v1::Task& task : train_tasks_) {
    if (task.reference_solution().empty()) continue;
    KF_ASSIGN_OR_RETURN(v1::WorkItem item,
                        MakeWorkItem(task, WarmUpRound::GroupId(items.size(), nonce_), 1));
    item.set_warm_up(true);
    item.set_warm_up_completion(
        ReferenceAnswer(task.reference_solution(), spec_.prompt().reasoning_tags()));
    item.clear_multi_turn();
    item.clear_prompt();
    // No batch after: the first RL step's candidates name it, and their
    // verifiers make it ahead then, steps before it is needed. Made here it
    // doubled the warm-ups' GPU work while the warm start trained (on 4x
    // H100, with each task's warm-up on two verifiers, the last came back
    // 75 s after they went out, 30 s after the warm start ended).
    item.clear_next_batch_id();
    // Its verdict is measured while the warm start trains, maybe on the
    // verifier's GPU, and the policy learns to write this very completion:
    // cached, it would be every duplicate's. The first RL step's duplicates
    // are verified at their own moment instead.
    item.mutable_verifier()->set_use_cache(false);
    items.push_back(std::move(item));
    task_ids.push_back(task.id());
  }
  if (items.empty()) return absl::OkStatus();
  log_.Info("verifier warm-ups offered", {{"job", job_.id()}, {"tasks", items.size()},
                                          {"batch", items.front().batch_id()}});
  warm_up_.Open(std::move(task_ids), absl::Now());
  return deps_.groups->Offer(std::move(items));
}

void TrainingRun::TakeWarmUp(CompletedGroup group) {
  evaluated_samples_ += std::ssize(group.samples);
  const std::string task = group.item.task().id();
  if (!warm_up_.Take(group, absl::Now())) {
    log_.Info("verifier warm-up back twice or of no task out; not counted again",
              {{"job", job_.id()}, {"group", group.item.group_id()}, {"task", task}});
    return;
  }
  const v1::Verdict& verdict = group.samples.front().verdict();
  // "accepted", not "correct": a correct verdict may still fail a check.
  const bool accepted = WarmUpRound::Accepted(verdict);
  log_.Info("verifier warm-up back",
            {{"job", job_.id()},
             {"task", task},
             {"accepted", accepted},
             {"why_not", accepted ? "" : WarmUpRound::WhyNotAccepted(verdict)},
             {"speedup", verdict.speedup_vs_eager()},
             {"verify_s", verdict.total_seconds()}});
  if (warm_up_.complete()) LogWarmUpSummary();
}

void TrainingRun::LogWarmUpSummary() {
  const std::string summary = warm_up_.Summary();
  log_.Info(summary, {{"job", job_.id()}});
  if (absl::Status s = deps_.jobs->Log(job_.id(), summary); !s.ok()) {
    log_.Warning("cannot record the warm-up's summary", {{"job", job_.id()}, {"error", s.message()}});
  }
}

bool TrainingRun::SampledSince(const CompletedGroup& group, int64_t version) {
  return std::all_of(group.samples.begin(), group.samples.end(), [&](const v1::ScoredSample& s) {
    return s.sample().policy_version() >= version;
  });
}

bool TrainingRun::TooStale(const CompletedGroup& group) const {
  // The tracker bounds staleness on delivery; a group that waited since can
  // have fallen further behind.
  return !SampledSince(group, state_.policy_version() - spec_.max_staleness());
}

GroupsOut TrainingRun::CountGroupsOut(int64_t usable_from, int64_t batch) const {
  const int64_t carried = std::count_if(carried_.begin(), carried_.end(),
                                        [&](const CompletedGroup& g) {
                                          return SampledSince(g, usable_from);
                                        });
  const GroupTracker::UntakenCount untaken = deps_.groups->UntakenGroups(job_.id(), usable_from);
  return GroupsOut{.untaken = untaken.offered_from,
                   .batch = batch,
                   .carried = carried,
                   .older = (untaken.all - untaken.offered_from) +
                            (static_cast<int64_t>(carried_.size()) - carried)};
}

OfferWindow TrainingRun::StepOfferWindow() const {
  // This step is step() + 1 of TotalSteps().
  return {.prompts_per_step = spec_.prompts_per_step(),
          .max_staleness = spec_.max_staleness(),
          .lookahead_steps = spec_.lookahead_steps(),
          .spare_groups = spec_.spare_groups_per_step(),
          .steps_after = TotalSteps() - trainer_->step() - 1};
}

absl::StatusOr<std::vector<CompletedGroup>> TrainingRun::CollectGroups() {
  const int64_t need = spec_.prompts_per_step();
  const OfferWindow window = StepOfferWindow();
  std::vector<CompletedGroup> batch;
  // The carried groups (RouteCompleted puts training groups there) fill
  // the batch, the rest stay carried; too stale ones are dropped, counted.
  auto fill = [&] {
    std::vector<CompletedGroup> waiting = std::move(carried_);
    carried_.clear();
    for (CompletedGroup& group : waiting) {
      if (TooStale(group)) {
        stale_samples_ += static_cast<int64_t>(group.samples.size());
        continue;
      }
      (static_cast<int64_t>(batch.size()) < need ? batch : carried_).push_back(std::move(group));
    }
  };
  // This step trains from the current version, the next from the one after
  // (if this step updates the policy; if it does not, a few groups more are
  // offered than needed, within the cap of offer_window.h).
  const int64_t usable_now = state_.policy_version() - spec_.max_staleness();
  fill();
  absl::Time said = absl::Now();
  const uint64_t dropped_before = deps_.groups->stats().groups_dropped;
  while (static_cast<int64_t>(batch.size()) < need) {
    KF_RETURN_IF_ERROR(CheckInterrupt());
    // Only one job trains at a time, so the tracker's drops are this job's.
    const uint64_t dropped = deps_.groups->stats().groups_dropped - dropped_before;
    if (batch.empty() && dropped >= static_cast<uint64_t>(spec_.max_dropped_groups_per_step())) {
      return absl::FailedPreconditionError(absl::StrCat(
          dropped, " groups of this step were dropped and none came back scored "
          "(max_dropped_groups_per_step ", spec_.max_dropped_groups_per_step(),
          "); the last: ", deps_.groups->LastDropReason()));
    }
    const GroupsOut now = CountGroupsOut(usable_now, static_cast<int64_t>(batch.size()));
    const int64_t want = GroupsToOfferWhileCollecting(window, now);
    if (want > 0) KF_RETURN_IF_ERROR(OfferGroups(want));
    RouteCompleted(absl::Milliseconds(500));
    fill();
    if (absl::Now() - said > absl::Seconds(deps_.config->batch_wait_log_s())) {
      said = absl::Now();
      log_.Info("waiting for scored groups",
                {{"job", job_.id()}, {"have", batch.size()}, {"need", need},
                 {"untaken", now.untaken}, {"steps_ahead", StepsAhead(window)},
                 {"group_wait_s", absl::ToDoubleSeconds(deps_.groups->GroupWait())},
                 {"waiting_for", deps_.groups->DescribeWaiting(job_.id())}});
    }
  }
  // With a staleness bound of at least one version, later steps' groups are
  // sampled (under this version) while this step trains: the next step's,
  // offered now, or with lookahead_steps those already out since this
  // step's collection (this tops up any that were dropped).
  const int64_t next = GroupsToOfferAfterBatch(
      window, CountGroupsOut(usable_now + 1, static_cast<int64_t>(batch.size())));
  if (next > 0) KF_RETURN_IF_ERROR(OfferGroups(next));
  return batch;
}

absl::Status TrainingRun::RolloutStep(absl::Time started) {
  StepTimer timer;
  const absl::Time wait_start = absl::Now();
  KF_ASSIGN_OR_RETURN(std::vector<CompletedGroup> completed, CollectGroups());
  timer.AddWait(absl::Now() - wait_start);
  for (const CompletedGroup& group : completed) {
    for (const v1::ScoredSample& s : group.samples) timer.AddSample(s);
  }
  std::vector<ScoredGroup> groups = ScoreGroups(std::move(completed), spec_);
  // Labelled with the step these samples train, as the progress reports it.
  if (absl::Status s = AppendSampleLog(job_dir_ / "samples.jsonl", trainer_->step() + 1, groups,
                                       spec_.sample_log());
      !s.ok()) {
    log_.Warning("cannot write the sample log", {{"job", job_.id()}, {"error", s.message()}});
  }
  v1::JobProgress progress = last_progress_;
  LearnerMetrics::StepFigures figures;
  SummariseStep(groups, state_.policy_version(), &progress, &figures);
  for (const ScoredGroup& group : groups) {
    for (size_t i = 0; i < group.samples.size(); ++i) {
      if (group.rewards[i].usable) {
        curriculum_->Record(group.item.task(), group.samples[i].verdict().correct() &&
                                                   !group.rewards[i].hacked);
      }
    }
  }
  GroupSelection selection;
  const bool best_of_n = spec_.algorithm() == v1::ALGORITHM_BEST_OF_N;
  std::vector<TrainSequence> batch =
      best_of_n ? BestOfNSequences(groups, spec_.best_of_n(), &selection)
                : GrpoSequences(groups, spec_.grpo(), spec_.reward().hierarchical(),
                                *policy_->tokenizer, &selection);
  TrainStepStats stats;
  if (batch.empty()) {
    // Nothing to learn from (no reward variance, nothing above the
    // threshold): the step passes without an update.
    trainer_->set_step(trainer_->step() + 1);
  } else {
    TrainStepParams params{.objective = best_of_n ? Objective::kSupervised : Objective::kGrpo,
                           .grpo = {.clip_low = spec_.grpo().clip_low(),
                                    .clip_high = spec_.grpo().clip_high(),
                                    .kl_coef = spec_.grpo().kl_coef(),
                                    .kl_max = spec_.grpo().kl_max(),
                                    .tis_cap = spec_.grpo().tis_cap()},
                           .epochs = best_of_n ? 1 : spec_.grpo().epochs_per_batch(),
                           .recompute_old_logprobs = spec_.grpo().recompute_old_logprobs()};
    const absl::Time train_start = absl::Now();
    KF_ASSIGN_OR_RETURN(stats, trainer_->Step(batch, params));
    timer.AddTraining(absl::Now() - train_start, stats.tokens * params.epochs);
  }
  int64_t sampled = 0, tokens = 0;
  for (const ScoredGroup& group : groups) {
    for (const v1::ScoredSample& s : group.samples) {
      ++sampled;
      tokens += s.sample().completion_tokens_size();
    }
  }
  state_.set_samples_trained(state_.samples_trained() + sampled);
  trained_samples_ += sampled;
  state_.set_tokens_trained(state_.tokens_trained() + tokens);
  // Throughput over the wall time since the previous step ended: a step
  // whose groups were already complete takes no time of its own.
  const absl::Time now = absl::Now();
  const double seconds =
      std::max(1e-3, absl::ToDoubleSeconds(now - std::min(started, last_step_end_)));
  progress.set_samples_per_second(static_cast<double>(sampled) / seconds);
  progress.set_tokens_per_second(static_cast<double>(tokens) / seconds);
  last_step_end_ = now;
  curriculum_->EndStep();
  progress.set_level2_share(curriculum_->level2_share());
  return FinishStep(stats, std::move(progress), std::move(figures), started, std::move(timer));
}

absl::Status TrainingRun::FinishStep(const TrainStepStats& stats, v1::JobProgress progress,
                                     LearnerMetrics::StepFigures figures, absl::Time started,
                                     StepTimer timer) {
  if (stats.updates > stats.skipped_updates) {
    state_.set_policy_version(state_.policy_version() + 1);
    const absl::Time publish_start = absl::Now();
    KF_RETURN_IF_ERROR(Publish());
    timer.AddWeightSync(absl::Now() - publish_start);
  }
  // The cadence: from the previous step's end, so checkpoints and
  // evaluation offers between steps count against the step after them.
  const absl::Time step_end = absl::Now();
  *progress.mutable_times() = timer.Finish(step_end - std::min(started, last_any_step_end_));
  last_any_step_end_ = step_end;
  *state_.add_step_times_history() = progress.times();
  state_.set_step(trainer_->step());
  state_.set_optimizer_steps(trainer_->optimizer().steps());
  state_.add_loss_history(stats.loss);
  KF_RETURN_IF_ERROR(MaybeEndWarmStart());
  state_.add_reward_history(progress.mean_reward());
  state_.add_correct_rate_history(progress.pass_rates().correct());
  *state_.add_pass_rate_history() = progress.pass_rates();
  if (IsMultiTurn(spec_.multi_turn())) {
    // Supervised steps carry the last sampled step's figures; the curves
    // leave those steps out.
    v1::TurnPoint* turns = state_.add_turn_history();
    *turns->mutable_solved_by_turn() = progress.solved_by_turn();
    *turns->mutable_reward_by_turn() = progress.reward_by_turn();
    turns->set_turns_per_trajectory(progress.turns_per_trajectory());
  }
  progress.set_step(state_.step());
  progress.set_total_steps(TotalSteps());
  progress.set_warm_start_steps(spec_.algorithm() == v1::ALGORITHM_SFT ? 0 : WarmStartSteps());
  progress.set_policy_version(state_.policy_version());
  progress.set_policy_loss(stats.loss);
  progress.set_kl(stats.kl);
  progress.set_entropy(stats.entropy);
  progress.set_grad_norm(stats.grad_norm);
  progress.set_tis_capped_fraction(stats.tis_capped_fraction);
  FillLedger(&progress);
  figures.learning_rate = stats.learning_rate;
  figures.step_seconds = absl::ToDoubleSeconds(absl::Now() - started);
  figures.samples = stats.sequences;
  figures.tokens = stats.tokens;
  deps_.metrics->ObserveStep(progress, figures);
  last_progress_ = progress;
  log_.Info("step", {{"job", job_.id()}, {"step", progress.step()},
                     {"version", progress.policy_version()}, {"loss", stats.loss},
                     {"reward", progress.mean_reward()}, {"correct", progress.pass_rates().correct()},
                     {"entropy", stats.entropy}, {"clip_fraction", stats.clip_fraction},
                     {"tis_capped", stats.tis_capped_fraction},
                     {"ratio", stats.mean_ratio}, {"lr", stats.learning_rate},
                     {"seconds", figures.step_seconds},
                     {"rollout_s", progress.times().rollout_seconds()},
                     {"verify_s", progress.times().verify_seconds()},
                     {"train_s", progress.times().train_seconds()},
                     // Compute the forward passes spent on padding.
                     {"pad_share", stats.padded_tokens > 0
                                       ? 1.0 - static_cast<double>(stats.sequence_tokens) /
                                                   static_cast<double>(stats.padded_tokens)
                                       : 0.0},
                     {"sync_s", progress.times().weight_sync_seconds()},
                     {"wait_s", progress.times().learner_wait_seconds()}});
  return deps_.jobs->ReportProgress(job_.id(), progress);
}

void TrainingRun::RouteCompleted(absl::Duration wait) {
  for (CompletedGroup& group : deps_.groups->TakeCompleted(wait)) {
    if (group.item.job_id() != job_.id()) continue;  // of a job that ended
    if (group.item.warm_up()) {
      TakeWarmUp(std::move(group));
    } else if (group.item.eval()) {
      TakeEvalGroup(std::move(group));
    } else {
      carried_.push_back(std::move(group));  // the next RL step checks its staleness
    }
  }
}

absl::Status TrainingRun::FlushRounds() {
  const absl::Time deadline = absl::Now() + absl::Seconds(spec_.group_timeout_s());
  // A group the tracker dropped never comes back: no wait for it.
  auto waiting = [&] {
    return (eval_.open() || warm_up_.outstanding()) &&
           deps_.groups->UntakenGroups(job_.id()).rounds > 0;
  };
  if (warm_up_.outstanding() && waiting()) {
    // Said in the job's log too: the last step's line would otherwise stand
    // still for as long as the wait.
    const std::string line = absl::StrFormat(
        "waiting up to %.0f s (group_timeout_s) for %d verifier warm-up(s) still out",
        spec_.group_timeout_s(), warm_up_.not_back());
    log_.Info(line, {{"job", job_.id()}});
    if (absl::Status s = deps_.jobs->Log(job_.id(), line); !s.ok()) {
      log_.Warning("cannot record the wait for warm-ups", {{"job", job_.id()}, {"error", s.message()}});
    }
  }
  while (waiting() && absl::Now() < deadline) {
    KF_RETURN_IF_ERROR(CheckInterrupt());
    RouteCompleted(absl::Milliseconds(500));
  }
  if (eval_.open()) FinishEval();
  if (warm_up_.outstanding()) LogWarmUpSummary();  // "...; 2 not back; ..."
  return absl::OkStatus();
}

absl::Status TrainingRun::MaybeStartEval() {
  // Evaluation groups that came back during supervised steps (nothing else
  // takes complete groups then).
  RouteCompleted(absl::ZeroDuration());
  const int32_t every = spec_.eval().every_steps();
  if (every <= 0 || heldout_tasks_.empty() || trainer_->step() % every != 0) return absl::OkStatus();
  // A round still short of groups (some timed out and were dropped) is
  // summarised with what came back.
  if (eval_.open()) FinishEval();
  const int32_t samples = spec_.eval().samples_per_task();
  for (size_t i = 0; i < heldout_tasks_.size(); ++i) {
    KF_ASSIGN_OR_RETURN(
        v1::WorkItem item,
        MakeWorkItem(heldout_tasks_[i], EvalRound::GroupId(trainer_->step(), i, nonce_), samples));
    item.set_eval(true);
    item.clear_multi_turn();
    item.clear_prompt();
    // One sample per task is the greedy answer, as KernelBench reports pass@1.
    if (samples == 1) item.mutable_sampling()->set_temperature(0);
    KF_RETURN_IF_ERROR(deps_.groups->Offer(std::move(item)));
  }
  eval_.Open(trainer_->step(), heldout_tasks_.size());
  return absl::OkStatus();
}

int64_t TrainingRun::CarriedSamples() const {
  int64_t samples = 0;
  for (const CompletedGroup& group : carried_) samples += std::ssize(group.samples);
  return samples;
}

void TrainingRun::FillLedger(v1::JobProgress* progress) const {
  const GroupTracker::Stats now = deps_.groups->stats();
  const GroupTracker::Stats& base = tracker_at_start_;
  progress->set_samples_accepted(static_cast<int64_t>(now.accepted - base.accepted));
  progress->set_samples_trained(trained_samples_);
  progress->set_samples_dropped_stale(stale_samples_);
  progress->set_samples_evaluated(evaluated_samples_);
  progress->set_samples_discarded(
      static_cast<int64_t>(now.samples_discarded - base.samples_discarded));
  progress->set_samples_out(now.samples_buffered + CarriedSamples());
  progress->set_groups_reissued(static_cast<int64_t>(now.groups_reissued - base.groups_reissued));
  progress->set_groups_dropped(static_cast<int64_t>(now.groups_dropped - base.groups_dropped));
}

void TrainingRun::TakeEvalGroup(CompletedGroup group) {
  evaluated_samples_ += std::ssize(group.samples);
  const std::string id = group.item.group_id();
  if (!eval_.Take(std::move(group))) {
    // Its round was summarised without it: in no round's figures (the
    // ledger has it as evaluated).
    log_.Info("held-out group back after its round ended; in no round's figures",
              {{"job", job_.id()}, {"group", id}, {"open_round", eval_.step()}});
    return;
  }
  if (eval_.complete()) FinishEval();
}

void TrainingRun::FinishEval() {
  const EvalRound::Summary round = eval_.Close();
  std::vector<TaskVerdicts> results;
  for (const CompletedGroup& group : round.groups) {
    TaskVerdicts task{.task_id = group.item.task().id(), .level = group.item.task().level()};
    for (const v1::ScoredSample& s : group.samples) task.verdicts.push_back(s.verdict());
    results.push_back(std::move(task));
  }
  const int samples = spec_.eval().samples_per_task();
  v1::EvalReport report =
      SummarizeEval(results, {.ks = samples > 1 ? std::vector<int>{1, samples} : std::vector<int>{1}});
  report.set_step(round.step);
  report.set_source(absl::StrCat(job_.id(), " at step ", round.step, " (policy versions ",
                                 round.min_policy_version, "..", round.max_policy_version, ")"));
  report.set_tasks(absl::StrCat(round.groups.size(), " of ", round.offered, " held-out tasks back"));
  deps_.metrics->ObserveEval(report);
  if (report.overall().tasks() > 0) {  // a round with nothing back is no point at 0
    v1::HeldOutPoint* point = state_.add_heldout_history();
    point->set_step(round.step);
    *point->mutable_overall() = report.overall();
    point->set_min_policy_version(round.min_policy_version);
    point->set_max_policy_version(round.max_policy_version);
    WriteCurves();
  }
  log_.Info("held-out evaluation", {{"job", job_.id()}, {"step", round.step},
                                    {"tasks", round.groups.size()},
                                    {"correct_rate", report.overall().correct_rate()},
                                    {"compile_rate", report.overall().compile_rate()},
                                    {"versions", absl::StrCat(round.min_policy_version, "..",
                                                              round.max_policy_version)}});
  if (absl::Status s = deps_.jobs->ReportEval(job_.id(), report); !s.ok()) {
    log_.Warning("cannot record the evaluation", {{"job", job_.id()}, {"error", s.message()}});
  }
}

absl::Status TrainingRun::Publish() {
  const absl::Time started = absl::Now();
  KF_ASSIGN_OR_RETURN(std::shared_ptr<const WeightSnapshot> snapshot,
                      WeightSnapshot::Capture(policy_->model.get(), job_.id(),
                                              state_.policy_version(), flat_.get()));
  deps_.weights->Publish(std::move(snapshot));
  if (flat_ != nullptr) {
    // Before new work asks for the version, so members have it on time.
    if (absl::Status s = deps_.broadcaster->Broadcast(job_.id(), state_.policy_version()); !s.ok()) {
      log_.Warning("weight broadcast failed; rollout workers fetch the weights over gRPC",
                   {{"job", job_.id()}, {"version", state_.policy_version()}, {"error", s.message()}});
    }
  }
  deps_.groups->SetPolicyVersion(state_.policy_version());
  deps_.metrics->ObserveWeightPublish(absl::ToDoubleSeconds(absl::Now() - started));
  return absl::OkStatus();
}

absl::Status TrainingRun::Checkpoint() {
  *state_.mutable_curriculum() = curriculum_->Save();
  state_.set_step(trainer_->step());
  state_.set_optimizer_steps(trainer_->optimizer().steps());
  KF_ASSIGN_OR_RETURN(std::string dir,
                      WriteTrainingCheckpoint({.job_dir = job_dir_,
                                               .source_model_dir = source_model_dir_,
                                               .spec = spec_.checkpoint()},
                                              *policy_->model, trainer_->optimizer(), state_));
  last_checkpoint_step_ = state_.step();
  // Older checkpoints are pruned: the side files come from the newest.
  source_model_dir_ = dir;
  deps_.metrics->checkpoints_written.Increment();
  log_.Info("checkpoint written", {{"job", job_.id()}, {"dir", dir}, {"step", state_.step()}});
  WriteCurves();
  return deps_.jobs->ReportCheckpoint(job_.id(), dir);
}

void TrainingRun::WriteCurves() {
  // Supervised steps (the warm start; all of an SFT job) sample nothing: the
  // plot shades them instead of drawing a reward of 0.
  const int64_t supervised =
      spec_.algorithm() == v1::ALGORITHM_SFT ? TotalSteps() : WarmStartSteps();
  const std::string& name = spec_.name();  // the job's id when none was given
  const CurvesFiles files = WriteCurvesFiles(
      job_dir_, state_,
      {.title = name.empty() || name == job_.id() ? job_.id() : absl::StrCat(job_.id(), " ", name),
       .supervised_steps = supervised});
  if (!files.svg_status.ok()) {
    log_.Warning("cannot write the training curves", {{"job", job_.id()},
                                                      {"path", files.svg.string()},
                                                      {"error", files.svg_status.message()}});
  }
  if (!files.json_status.ok()) {
    log_.Warning("cannot write the training figures", {{"job", job_.id()},
                                                       {"path", files.json.string()},
                                                       {"error", files.json_status.message()}});
  }
  // Said once a job: the same reason holds at every checkpoint.
  if (!files.png_note.empty() && !png_note_logged_) {
    log_.Info(files.png_note, {{"job", job_.id()}});
    png_note_logged_ = true;
  }
}

}  // namespace

absl::Status RunTrainingJob(const v1::Job& job, const TrainingRunDeps& deps) {
  TrainingRun run(job, deps);
  absl::Status status = run.Run();
  if (absl::IsAborted(status)) run.CheckpointOnExit();
  return status;
}

}  // namespace kforge
