// The job driver's offering of groups in asynchronous GRPO
// (JobSpec.max_staleness, lookahead_steps), a whole job on a tiny model on
// the CPU. A stand-in for the rollout workers and verifiers takes every
// group the learner offers and holds them all back until no new one has come
// for a while, so what it holds then is what the learner offered before the
// first step's batch could complete; then it scores each group as soon as
// it is offered, stamped with the newest published policy version. Every
// sample must be trained on once, none dropped as stale, and no group
// offered beyond the job's need.
#include "learner/training/training_run.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/config/json_config.h"
#include "common/config/proto_defaults.h"
#include "kforge/v1/learner_state.pb.h"
#include "learner/jobs/job_registry.h"
#include "learner/jobs/job_spec_check.h"
#include "learner/learner_metrics.h"
#include "learner/rollout/group_tracker.h"
#include "learner/weights/weight_publisher.h"
#include "prompts/trajectory_end.h"
#include "tests/support/tiny_checkpoint.h"

namespace kforge {
namespace {

constexpr int kPromptsPerStep = 2;
constexpr int kGroupSize = 2;

// Takes the learner's groups and delivers a scored sample for each of their
// indexes: even indexes correct, odd ones failing to compile, so every group
// has reward variance and every step trains. Until no new group has come for
// `quiet`, everything taken is held back (held_back() then says how many).
class ScoringWorker {
 public:
  ScoringWorker(GroupTracker* groups, const WeightPublisher* weights, absl::Duration quiet)
      : groups_(groups), weights_(weights), quiet_(quiet), thread_([this] { Loop(); }) {}
  ~ScoringWorker() {
    stop_.Notify();
    thread_.join();
  }
  // -1 while still holding back.
  int64_t held_back() const { return held_back_.load(); }
  std::vector<v1::WorkItem> taken() const {
    absl::MutexLock lock(&mu_);
    return taken_;
  }

 private:
  void Loop() {
    std::vector<v1::WorkItem> held;
    absl::Time newest = absl::InfiniteFuture();
    while (!stop_.HasBeenNotified()) {
      std::vector<v1::WorkItem> items = groups_->Take("scorer", 64, absl::Milliseconds(50));
      {
        absl::MutexLock lock(&mu_);
        taken_.insert(taken_.end(), items.begin(), items.end());
      }
      if (held_back_.load() < 0) {
        if (!items.empty()) newest = absl::Now();
        held.insert(held.end(), items.begin(), items.end());
        if (held.empty() || absl::Now() - newest < quiet_) continue;
        held_back_.store(static_cast<int64_t>(held.size()));
        items = std::move(held);
      }
      for (const v1::WorkItem& item : items) Score(item);
    }
  }

  void Score(const v1::WorkItem& item) {
    for (int32_t index = 0; index < item.group_size(); ++index) {
      v1::ScoredSample scored;
      v1::Sample* sample = scored.mutable_sample();
      v1::SampleKey* key = sample->mutable_key();
      key->set_job_id(item.job_id());
      key->set_group_id(item.group_id());
      key->set_index_in_group(index);
      key->set_sample_id(TurnSampleId(item.job_id(), item.group_id(), index, 0));
      sample->set_task_id(item.task().id());
      sample->set_policy_version(weights_->version());
      *sample->mutable_prompt_tokens() = item.prompt_tokens();
      for (int i = 0; i < 4 && i < item.prompt_tokens_size(); ++i) {
        sample->add_completion_tokens(item.prompt_tokens(i));
        sample->add_completion_logprobs(-1.0f - 0.1f * static_cast<float>(index));
      }
      v1::Verdict* verdict = scored.mutable_verdict();
      const bool correct = index % 2 == 0;
      verdict->set_correct(correct);
      verdict->set_stage_reached(correct ? v1::STAGE_MULTI_INPUT : v1::STAGE_COMPILE);
      for (v1::Stage stage : {v1::STAGE_STATIC, v1::STAGE_COMPILE, v1::STAGE_TINY_RUN,
                              v1::STAGE_MULTI_INPUT}) {
        v1::StageResult* result = verdict->add_stages();
        result->set_stage(stage);
        result->set_outcome(correct || stage == v1::STAGE_STATIC ? v1::OUTCOME_PASSED
                            : stage == v1::STAGE_COMPILE        ? v1::OUTCOME_FAILED
                                                                : v1::OUTCOME_SKIPPED);
      }
      absl::StatusOr<v1::SampleAck> ack = groups_->Deliver(scored);
      EXPECT_TRUE(ack.ok() && ack->status() == v1::SampleAck::ACCEPTED)
          << key->sample_id() << ": " << (ack.ok() ? ack->DebugString() : ack.status().ToString());
    }
  }

  GroupTracker* const groups_;
  const WeightPublisher* const weights_;
  const absl::Duration quiet_;
  std::atomic<int64_t> held_back_{-1};
  mutable absl::Mutex mu_;
  std::vector<v1::WorkItem> taken_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

struct JobOutcome {
  absl::Status status;
  int64_t held_back = -1;  // groups out before the first batch could complete
  GroupTracker::Stats tracker;
  v1::JobProgress progress;
  // samples.jsonl: "group/index" -> the steps that trained it.
  std::map<std::string, std::vector<int>> trained;
  int64_t samples_trained = -1;  // TrainerState of the final checkpoint
  std::vector<v1::WorkItem> taken;  // every group the worker took
  std::vector<std::string> log;     // the job's log lines
  std::string job_id;
};

class AsyncOfferingTest : public testing::TinyCheckpointSuite<Architecture::kQwen2, 3> {
 protected:
  void SetUp() override { at::set_num_threads(1); }

  // Runs a GRPO job of `total_steps` steps to its end against a
  // ScoringWorker.
  // `warm_start_steps` supervised steps first; `seed_rotation` (when > 0)
  // the RL steps that share a reference batch.
  JobOutcome RunJob(int32_t max_staleness, int32_t lookahead_steps, int32_t total_steps,
                    int32_t spare_groups = 0, int32_t warm_start_steps = 0,
                    int32_t seed_rotation = 0) {
    JobOutcome outcome;
    testing::ScratchDir state;
    const std::string tasks_root = std::string(KFORGE_TEST_SOURCE_DIR) + "/tasks";
    v1::LearnerConfig config;
    config.set_state_dir(state.path());
    config.set_builtin_tasks_dir(tasks_root);
    config.set_device("cpu");
    EXPECT_TRUE(ApplyProtoDefaults(&config).ok());

    v1::JobSpec spec;
    spec.set_model_path(dir_->Sub("model"));
    spec.mutable_tasks()->set_builtin("kforge-mini");
    spec.mutable_tasks()->set_solutions_dir("solutions-torch");
    spec.set_total_steps(total_steps);
    spec.set_prompts_per_step(kPromptsPerStep);
    spec.mutable_grpo()->set_group_size(kGroupSize);
    spec.mutable_optimizer()->set_batch_size(kPromptsPerStep * kGroupSize);
    spec.mutable_optimizer()->set_micro_batch_size(kPromptsPerStep * kGroupSize);
    spec.mutable_optimizer()->set_bf16(false);
    spec.mutable_checkpoint()->set_every_steps(1000);
    spec.mutable_sample_log()->set_per_step(65536);
    spec.set_max_staleness(max_staleness);
    spec.set_lookahead_steps(lookahead_steps);
    spec.set_spare_groups_per_step(spare_groups);
    spec.set_warm_start_steps(warm_start_steps);
    if (seed_rotation > 0) {
      spec.mutable_verifier()->mutable_multi_input()->set_seed_rotation_versions(seed_rotation);
    }
    const absl::Status checked = CheckJobSpec({.builtin_tasks_root = tasks_root}, &spec);
    EXPECT_TRUE(checked.ok()) << checked;

    prometheus::Registry registry;
    LearnerMetrics metrics(registry);
    absl::StatusOr<std::unique_ptr<JobRegistry>> jobs =
        JobRegistry::Create({.state_dir = state.path()}, &metrics);
    EXPECT_TRUE(jobs.ok()) << jobs.status();
    if (!jobs.ok() || !checked.ok()) return outcome;
    EXPECT_TRUE((*jobs)->Submit(spec).ok());
    std::optional<v1::Job> job = (*jobs)->StartNext();
    EXPECT_TRUE(job.has_value());
    if (!job.has_value()) return outcome;

    GroupTracker groups({});
    WeightPublisher weights;
    {
      ScoringWorker worker(&groups, &weights, absl::Milliseconds(1500));
      outcome.status = RunTrainingJob(*job, {.jobs = jobs->get(),
                                             .groups = &groups,
                                             .weights = &weights,
                                             .metrics = &metrics,
                                             .config = &config,
                                             .stopping = [] { return false; }});
      outcome.held_back = worker.held_back();
      outcome.taken = worker.taken();
    }
    outcome.job_id = job->id();
    absl::StatusOr<JobRegistry::EventBatch> events =
        (*jobs)->WaitForEvents(job->id(), 0, absl::ZeroDuration(), /*replay=*/true);
    if (events.ok()) {
      for (const v1::JobEvent& event : events->events) {
        if (event.has_log()) outcome.log.push_back(event.log());
      }
    }
    outcome.tracker = groups.stats();
    absl::StatusOr<v1::Job> ended = (*jobs)->Get(job->id());
    if (ended.ok()) outcome.progress = ended->progress();

    const std::string job_dir = state.Sub("jobs/" + job->id());
    std::ifstream samples(job_dir + "/samples.jsonl");
    for (std::string line; std::getline(samples, line);) {
      google::protobuf::Struct parsed;
      EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok()) << line;
      const auto& fields = parsed.fields();
      const std::string sample = absl::StrCat(fields.at("group").string_value(), "/",
                                              fields.at("index").number_value());
      outcome.trained[sample].push_back(static_cast<int>(fields.at("step").number_value()));
    }
    absl::StatusOr<std::string> trainer_state = ReadFileToString(
        absl::StrFormat("%s/checkpoints/step-%08d/trainer_state.json", job_dir,
                        warm_start_steps + total_steps));
    v1::TrainerState parsed_state;
    if (trainer_state.ok() && ParseJsonMessage(*trainer_state, &parsed_state).ok()) {
      outcome.samples_trained = parsed_state.samples_trained();
    }
    return outcome;
  }

  // What every job here must show: it ran to its end; each of its steps
  // trained prompts_per_step whole groups, each sample once; no sample was
  // dropped as stale, and the learner offered no group beyond its need;
  // every accepted sample is in the tracker's ledger.
  static void ExpectEverySampleTrainedOnce(const JobOutcome& outcome, int total_steps) {
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    const int64_t samples = int64_t{total_steps} * kPromptsPerStep * kGroupSize;
    EXPECT_EQ(outcome.progress.step(), total_steps);
    // Every step updated the policy: the staleness bound was in play.
    EXPECT_EQ(outcome.progress.policy_version(), total_steps);
    EXPECT_EQ(outcome.progress.samples_dropped_stale(), 0);
    EXPECT_EQ(outcome.samples_trained, samples);
    EXPECT_EQ(outcome.tracker.groups_issued, uint64_t(total_steps) * kPromptsPerStep);
    EXPECT_EQ(outcome.tracker.groups_reissued, 0u);
    EXPECT_EQ(outcome.tracker.groups_dropped, 0u);
    EXPECT_EQ(outcome.tracker.accepted, uint64_t(samples));
    EXPECT_EQ(outcome.tracker.samples_buffered, 0);
    EXPECT_EQ(static_cast<int64_t>(outcome.trained.size()), samples);
    ExpectLedgerAndStepsWhole(outcome, total_steps);
  }

  // The tracker's ledger balances, no sample was trained twice, and each
  // step trained prompts_per_step whole groups.
  static void ExpectLedgerAndStepsWhole(const JobOutcome& outcome, int total_steps) {
    EXPECT_EQ(outcome.tracker.accepted,
              outcome.tracker.samples_completed + outcome.tracker.samples_discarded +
                  static_cast<uint64_t>(outcome.tracker.samples_held));
    // The job's own ledger, as its last report has it, balances too (the
    // scoring worker may deliver a little more before it stops).
    const v1::JobProgress& p = outcome.progress;
    EXPECT_EQ(p.samples_accepted(), p.samples_trained() + p.samples_dropped_stale() +
                                        p.samples_evaluated() + p.samples_discarded() +
                                        p.samples_out())
        << p.ShortDebugString();
    EXPECT_GT(p.samples_accepted(), 0);
    EXPECT_LE(p.samples_accepted(), static_cast<int64_t>(outcome.tracker.accepted));
    EXPECT_EQ(p.samples_trained(), outcome.samples_trained);
    std::map<int, int> per_step;
    for (const auto& [sample, steps] : outcome.trained) {
      EXPECT_EQ(steps.size(), 1u) << sample << " trained more than once";
      for (int step : steps) ++per_step[step];
    }
    for (int step = 1; step <= total_steps; ++step) {
      EXPECT_EQ(per_step[step], kPromptsPerStep * kGroupSize) << "step " << step;
    }
  }

  // Spares: what was offered and not trained was dropped as stale, nothing
  // else, and nothing is left when the job ends.
  static void ExpectSparesAccounted(const JobOutcome& outcome, int total_steps) {
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    const int64_t samples = int64_t{total_steps} * kPromptsPerStep * kGroupSize;
    EXPECT_EQ(outcome.samples_trained, samples);
    EXPECT_EQ(outcome.tracker.accepted,
              uint64_t(samples + outcome.progress.samples_dropped_stale()));
    EXPECT_EQ(outcome.tracker.groups_issued * kGroupSize, outcome.tracker.accepted);
    ExpectLedgerAndStepsWhole(outcome, total_steps);
  }
};

TEST_F(AsyncOfferingTest, WithoutLookaheadOnlyThisStepsGroupsAreOutWhileItsBatchIsCollected) {
  const JobOutcome outcome = RunJob(/*max_staleness=*/1, /*lookahead_steps=*/0, /*total_steps=*/3);
  // The next step's groups come once this step's batch is complete.
  EXPECT_EQ(outcome.held_back, kPromptsPerStep);
  ExpectEverySampleTrainedOnce(outcome, 3);
}

TEST_F(AsyncOfferingTest, WithLookaheadTheNextStepsGroupsAreOutBeforeThisStepsBatchIsComplete) {
  const JobOutcome outcome = RunJob(/*max_staleness=*/1, /*lookahead_steps=*/1, /*total_steps=*/3);
  EXPECT_EQ(outcome.held_back, 2 * kPromptsPerStep);
  ExpectEverySampleTrainedOnce(outcome, 3);
}

TEST_F(AsyncOfferingTest, LookaheadIsBoundedByMaxStaleness) {
  const JobOutcome outcome = RunJob(/*max_staleness=*/2, /*lookahead_steps=*/4, /*total_steps=*/4);
  EXPECT_EQ(outcome.held_back, 3 * kPromptsPerStep);
  ExpectEverySampleTrainedOnce(outcome, 4);
}

TEST_F(AsyncOfferingTest, LookaheadIsBoundedByTheStepsLeft) {
  const JobOutcome outcome = RunJob(/*max_staleness=*/2, /*lookahead_steps=*/2, /*total_steps=*/2);
  EXPECT_EQ(outcome.held_back, 2 * kPromptsPerStep);
  ExpectEverySampleTrainedOnce(outcome, 2);
}

TEST_F(AsyncOfferingTest, WithoutAStalenessBoundLookaheadOffersNothingAhead) {
  const JobOutcome outcome = RunJob(/*max_staleness=*/0, /*lookahead_steps=*/2, /*total_steps=*/2);
  EXPECT_EQ(outcome.held_back, kPromptsPerStep);
  ExpectEverySampleTrainedOnce(outcome, 2);
}

// Spares: each step but the last is offered one group over its batch; the
// batch is the first groups back, the spare is carried to the next step.
TEST_F(AsyncOfferingTest, ASpareGroupIsOfferedOverEachBatchAndAccountedFor) {
  const JobOutcome outcome =
      RunJob(/*max_staleness=*/1, /*lookahead_steps=*/0, /*total_steps=*/3, /*spare_groups=*/1);
  EXPECT_EQ(outcome.held_back, kPromptsPerStep + 1);
  ExpectSparesAccounted(outcome, 3);
  EXPECT_GT(outcome.tracker.groups_issued, uint64_t{3} * kPromptsPerStep);
}

// Spares with lookahead under a looser bound: every spare trains (within
// max_staleness 2 a later step takes it and is offered fewer) and none is
// left over when the job ends. (The cap itself: OfferCapTest.)
TEST_F(AsyncOfferingTest, SparesWithLookaheadLeaveNothingOverAtTheJobsEnd) {
  const JobOutcome outcome =
      RunJob(/*max_staleness=*/2, /*lookahead_steps=*/1, /*total_steps=*/3, /*spare_groups=*/1);
  EXPECT_EQ(outcome.held_back, 2 * (kPromptsPerStep + 1));
  ExpectSparesAccounted(outcome, 3);
}

// Verifier warm-ups: while the warm start trains, one group per training
// task goes out whose answer is the task's reference solution, on the first
// RL steps' reference batch. Its verdict counts as evaluated, is never
// trained on, and the job's log sums them up. The RL groups name their
// batches from the RL steps done when they are offered: with max_staleness
// 1 a step's groups go out before the step before it trains, so the first
// two RL steps' groups meet b0 and the third's b1.
TEST_F(AsyncOfferingTest, WarmUpsGoOutOnTheFirstRlBatchAndAreNeverTrained) {
  constexpr int kSteps = 3;
  const JobOutcome outcome = RunJob(/*max_staleness=*/1, /*lookahead_steps=*/0, kSteps,
                                    /*spare_groups=*/0, /*warm_start_steps=*/2,
                                    /*seed_rotation=*/1);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  const std::string b0 = outcome.job_id + "/b0";
  const std::string b1 = outcome.job_id + "/b1";
  std::set<std::string> warm_tasks;
  std::set<std::string> rl_batches;
  for (const v1::WorkItem& item : outcome.taken) {
    if (item.warm_up()) {
      EXPECT_TRUE(warm_tasks.insert(item.task().id()).second) << "one warm-up per task";
      EXPECT_EQ(item.group_size(), 1);
      EXPECT_FALSE(item.task().reference_solution().empty());
      EXPECT_NE(item.warm_up_completion().find(item.task().reference_solution()), std::string::npos)
          << "the answer is the task's reference solution, as the warm start writes it";
      EXPECT_EQ(item.batch_id(), b0) << "the first RL steps' batch";
      EXPECT_EQ(item.next_batch_id(), "")
          << "the first RL step's candidates name the next batch; a warm-up made it too early";
      EXPECT_FALSE(item.verifier().use_cache())
          << "a verdict measured while the warm start trains is not every duplicate's";
    } else {
      EXPECT_FALSE(item.eval());
      rl_batches.insert(item.batch_id());
    }
  }
  EXPECT_GE(warm_tasks.size(), 2u);
  EXPECT_EQ(rl_batches, (std::set<std::string>{b0, b1})) << "a batch per RL step done (rotation 1)";
  const int64_t samples = int64_t{kSteps} * kPromptsPerStep * kGroupSize;
  EXPECT_EQ(outcome.samples_trained, samples) << "warm-ups are never trained on";
  EXPECT_EQ(static_cast<int64_t>(outcome.trained.size()), samples);
  const v1::JobProgress& p = outcome.progress;
  EXPECT_EQ(p.samples_evaluated(), static_cast<int64_t>(warm_tasks.size()));
  EXPECT_EQ(p.samples_accepted(), p.samples_trained() + p.samples_dropped_stale() +
                                      p.samples_evaluated() + p.samples_discarded() +
                                      p.samples_out())
      << p.ShortDebugString();
  const std::string summary = absl::StrFormat(
      "verifier warm-up: %d of %d training tasks' reference solutions verified correct",
      warm_tasks.size(), warm_tasks.size());
  EXPECT_TRUE(std::any_of(outcome.log.begin(), outcome.log.end(), [&](const std::string& line) {
    return line.find(summary) != std::string::npos;
  })) << "no \"" << summary << "\" in the job's log";
}

}  // namespace
}  // namespace kforge
