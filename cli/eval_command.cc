#include "cli/eval_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>
#include <regex>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "cli/local_funnel.h"
#include "common/config/json_config.h"
#include "common/paths/kernelbench_dir.h"
#include "common/server/executable_path.h"
#include "common/server/process_main.h"
#include "common/server/work_pool.h"
#include "eval/eval_metrics.h"
#include "eval/eval_plots.h"
#include "common/config/proto_defaults.h"
#include "prompts/task_prompt.h"
#include "prompts/trajectory_end.h"
#include "prompts/turn_feedback.h"
#include "learner/tasks/task_set.h"
#include "rollout_worker/dispatch/verifier_dispatcher.h"
#include "model/policy_loader.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "rollout_worker/sampler/rollout_engine.h"
#include "verifier_worker/verifier_service.h"

namespace kforge {
namespace {

namespace fs = std::filesystem;

// One candidate of one task.
struct Job {
  size_t task = 0;         // index into the task list
  int sample = 0;          // within the task
  int turn = 0;            // multi-turn candidates: the turn of its trajectory (sample)
  std::optional<std::string> completion;  // nullopt: the task has none
  std::string missing_reason;
};

// One candidate file: which sample of its task, which turn of that sample.
struct CandidateFile {
  int sample = 0;
  int turn = 0;
  std::string path;
};

// The candidate files of a task, in sample then turn order (see
// eval_command.h).
std::vector<CandidateFile> FindCandidates(const fs::path& dir, const v1::Task& task) {
  std::vector<CandidateFile> found;
  if (fs::exists(dir / (task.id() + ".py"))) {
    found.push_back({.path = (dir / (task.id() + ".py")).string()});
  }
  const std::string stem = fs::path(task.id()).filename().string();
  const std::string number = stem.substr(0, stem.find('_'));
  const std::regex pattern(absl::StrCat("level_", task.level(), "_problem_", number,
                                        "_sample_([0-9]+)(_turn_([0-9]+))?_kernel\\.py"));
  std::map<std::pair<int, int>, std::string> samples;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    int sample = 0, turn = 0;
    if (std::regex_match(name, match, pattern) && absl::SimpleAtoi(match[1].str(), &sample) &&
        (!match[3].matched || absl::SimpleAtoi(match[3].str(), &turn))) {
      samples[{sample, turn}] = entry.path().string();
    }
  }
  const int base = found.empty() ? 0 : 1;  // <task id>.py is sample 0
  for (const auto& [key, path] : samples) {
    found.push_back({.sample = base + key.first, .turn = key.second, .path = path});
  }
  return found;
}

v1::Verdict MissingVerdict(const std::string& why) {
  v1::Verdict verdict;
  verdict.set_stage_reached(v1::STAGE_STATIC);
  v1::StageResult* stage = verdict.add_stages();
  stage->set_stage(v1::STAGE_STATIC);
  stage->set_outcome(v1::OUTCOME_FAILED);
  stage->set_message(why);
  return verdict;
}

class Progress {
 public:
  Progress(std::string label, size_t total) : label_(std::move(label)), total_(total) { Draw(); }
  void Step() {
    absl::MutexLock lock(&mu_);
    ++done_;
    Draw();
    if (done_ == total_) std::fprintf(stderr, "\n");
  }

 private:
  void Draw() {
    const int width = 30;
    const int filled = total_ == 0 ? width : static_cast<int>(width * done_ / total_);
    std::fprintf(stderr, "\r  %-9s [%s%s] %zu/%zu", label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), done_, total_);
    std::fflush(stderr);
  }
  absl::Mutex mu_;
  const std::string label_;
  size_t done_ = 0;
  const size_t total_;
};

// An in-process funnel when there is no --server, started once for every
// round of an evaluation (its zygote and reference server take seconds).
absl::StatusOr<std::unique_ptr<LocalFunnel>> StartLocalFunnel(const EvalOptions& options) {
  if (!options.server.empty()) return std::unique_ptr<LocalFunnel>();
  return LocalFunnel::Start(options.python, options.device, options.concurrency,
                            options.concurrency);
}

// Verdicts for every job, in job order: on `local` (from StartLocalFunnel),
// or on --server when it is null.
absl::StatusOr<std::vector<v1::Verdict>> VerifyAll(const EvalOptions& options,
                                                   const std::vector<v1::Task>& tasks,
                                                   const std::vector<Job>& jobs,
                                                   LocalFunnel* local) {
  std::vector<v1::VerifyRequest> requests(jobs.size());
  std::vector<v1::Verdict> verdicts(jobs.size());
  std::vector<bool> pending(jobs.size(), false);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!jobs[i].completion.has_value()) {
      verdicts[i] = MissingVerdict(jobs[i].missing_reason);
      continue;
    }
    v1::VerifyRequest& request = requests[i];
    request.set_request_id(absl::StrCat(i));
    *request.mutable_task() = tasks[jobs[i].task];
    request.set_completion(*jobs[i].completion);
    request.mutable_options()->set_require_triton(options.require_triton);
    KF_RETURN_IF_ERROR(PrepareVerifyRequest(request));
    pending[i] = true;
  }
  const size_t count = static_cast<size_t>(std::count(pending.begin(), pending.end(), true));
  Progress progress("verifying", count);
  absl::BlockingCounter done(static_cast<int>(count));
  absl::Mutex mu;
  if (local != nullptr) {
    WorkPool pool("kf-eval", options.concurrency, 2 * options.concurrency);
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (!pending[i]) continue;
      pool.Submit([&, i] {
        v1::Verdict verdict = local->funnel().Verify(requests[i]);
        {
          absl::MutexLock lock(&mu);
          verdicts[i] = std::move(verdict);
        }
        progress.Step();
        done.DecrementCount();
      });
    }
    done.Wait();
    return verdicts;
  }
  KF_ASSIGN_OR_RETURN(
      std::unique_ptr<VerifierDispatcher> dispatcher,
      VerifierDispatcher::Create({.target = options.server, .security = options.security},
                                 [&](const v1::VerifyResponse& r) {
        size_t i = 0;
        if (!absl::SimpleAtoi(r.request_id(), &i) || i >= verdicts.size()) return;
        {
          absl::MutexLock lock(&mu);
          verdicts[i] = r.verdict();
        }
        progress.Step();
        done.DecrementCount();
      }));
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (pending[i]) KF_RETURN_IF_ERROR(dispatcher->Submit(requests[i]));
  }
  done.Wait();
  return verdicts;
}

absl::Status WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

absl::Status WriteOutputs(const fs::path& dir, const v1::EvalReport& report) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  KF_RETURN_IF_ERROR(WriteFile(dir / "report.json", ToJson(report) + "\n"));
  KF_RETURN_IF_ERROR(WriteFile(dir / "report.md", EvalMarkdown(report)));
  KF_RETURN_IF_ERROR(WriteFile(dir / "speedup_histogram.svg", SpeedupHistogramSvg(report)));
  KF_RETURN_IF_ERROR(WriteFile(dir / "pass_at_k.svg", PassAtKSvg(report)));
  return WriteFile(dir / "fast_p.svg", FastPSvg(report));
}

absl::StatusOr<std::vector<Job>> ReadCandidates(const EvalOptions& options,
                                                const std::vector<v1::Task>& tasks) {
  std::vector<Job> jobs;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const std::vector<CandidateFile> files = FindCandidates(options.candidates_dir, tasks[t]);
    if (files.empty()) {
      jobs.push_back({.task = t, .missing_reason = "no candidate file for this task"});
    }
    for (const CandidateFile& file : files) {
      KF_ASSIGN_OR_RETURN(std::string text, ReadFileToString(file.path));
      jobs.push_back(
          {.task = t, .sample = file.sample, .turn = file.turn, .completion = std::move(text)});
    }
  }
  return jobs;
}

// Completions from a model through the rollout engine, in rounds: the first
// turn of every sample of every task, then (with --turns) the next turn of
// each trajectory that has not ended.
class EvalSampler {
 public:
  // One prompt sampled `count` times, as samples first_sample.. of `task`
  // at `turn`.
  struct Request {
    size_t task = 0;
    int first_sample = 0;
    int turn = 0;
    int count = 1;
    std::string prompt;
  };

  static absl::StatusOr<std::unique_ptr<EvalSampler>> Create(const EvalOptions& options) {
    auto sampler = std::unique_ptr<EvalSampler>(new EvalSampler(options));
    KF_ASSIGN_OR_RETURN(sampler->policy_, LoadPolicy(options.model_dir, options.device, "auto"));
    std::fprintf(stderr, "kforge eval: sampling %d per task with %s\n", options.samples,
                 sampler->policy_->description.c_str());
    EvalSampler* self = sampler.get();
    KF_ASSIGN_OR_RETURN(
        sampler->engine_,
        RolloutEngine::Create(
            self->policy_->model.get(), self->policy_->tokenizer.get(),
            {.worker_id = "kforge-eval",
             .slots = std::max<int64_t>(options.samples, 8),
             .max_len = options.max_sequence_tokens},
            [self](v1::Sample sample, const v1::WorkItem& item, absl::Duration) {
              self->Finished(item, sample.key().index_in_group(), sample.completion_text(), "");
            },
            [self](const v1::WorkItem& item, const absl::Status& status) {
              // Samples of the group already delivered keep their answers.
              for (int i = 0; i < item.group_size(); ++i) {
                self->Finished(item, i, std::nullopt,
                               absl::StrCat("sampling failed: ", status.message()));
              }
            }));
    return sampler;
  }

  // The round's candidates, in (task, sample) order.
  absl::StatusOr<std::vector<Job>> Sample(const std::vector<Request>& requests) {
    int total = 0;
    for (const Request& r : requests) total += r.count;
    Progress progress(requests.empty() || requests[0].turn == 0
                          ? "sampling"
                          : absl::StrCat("turn ", requests[0].turn + 1),
                      static_cast<size_t>(total));
    absl::BlockingCounter done(total);
    {
      absl::MutexLock lock(&mu_);
      ++round_number_;
      round_ = {.requests = &requests, .progress = &progress, .done = &done};
      for (const Request& r : requests) round_.delivered.emplace_back(static_cast<size_t>(r.count));
    }
    // Whatever way this returns, no later callback may reach this round's
    // counter, progress or requests (a failed Submit leaves groups running).
    absl::Cleanup forget = [this] {
      absl::MutexLock lock(&mu_);
      round_ = {};
    };
    for (size_t r = 0; r < requests.size(); ++r) {
      v1::WorkItem item;
      item.set_job_id("eval");
      // A group id of its own per round: the engine seeds a sample by its
      // id, and a late answer of an earlier round must not land in this one.
      item.set_group_id(absl::StrCat(round_number_, "/", r));
      item.set_prompt_text(requests[r].prompt);
      item.set_group_size(requests[r].count);
      v1::SamplingParams& sampling = *item.mutable_sampling();
      sampling.set_temperature(options_.samples == 1 ? 0.0 : options_.temperature);
      sampling.set_max_new_tokens(options_.max_new_tokens);
      KF_RETURN_IF_ERROR(engine_->Submit(std::move(item)));
    }
    done.Wait();
    std::vector<Job> jobs;
    {
      absl::MutexLock lock(&mu_);
      jobs = std::move(round_.jobs);
    }
    std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
      return std::tie(a.task, a.sample) < std::tie(b.task, b.sample);
    });
    return jobs;
  }

  // Tokens of a rendered prompt, to keep follow-up prompts within the
  // context (RenderBoundedFollowUpPrompt).
  int64_t CountTokens(const std::string& text) const {
    return static_cast<int64_t>(policy_->tokenizer->Encode(text).size());
  }

 private:
  explicit EvalSampler(const EvalOptions& options) : options_(options) {}

  void Finished(const v1::WorkItem& item, int index, std::optional<std::string> completion,
                std::string why) {
    Progress* progress = nullptr;
    absl::BlockingCounter* done = nullptr;
    {
      absl::MutexLock lock(&mu_);
      const std::pair<std::string, std::string> id =
          absl::StrSplit(item.group_id(), absl::MaxSplits('/', 1));
      size_t r = 0;
      int64_t number = 0;
      if (round_.requests == nullptr || !absl::SimpleAtoi(id.first, &number) ||
          number != round_number_ || !absl::SimpleAtoi(id.second, &r) ||
          r >= round_.requests->size() || index < 0 ||
          static_cast<size_t>(index) >= round_.delivered[r].size() || round_.delivered[r][index]) {
        return;  // another round's, or a sample already counted
      }
      round_.delivered[r][index] = true;
      const Request& request = (*round_.requests)[r];
      round_.jobs.push_back({.task = request.task, .sample = request.first_sample + index,
                             .turn = request.turn, .completion = std::move(completion),
                             .missing_reason = std::move(why)});
      progress = round_.progress;
      done = round_.done;
    }
    progress->Step();
    done->DecrementCount();
  }

  struct Round {
    const std::vector<Request>* requests = nullptr;
    Progress* progress = nullptr;
    absl::BlockingCounter* done = nullptr;
    // Per request, which of its samples have been counted: each once.
    std::vector<std::vector<bool>> delivered;
    std::vector<Job> jobs;
  };

  const EvalOptions options_;
  std::unique_ptr<LoadedPolicy> policy_;
  absl::Mutex mu_;
  Round round_ ABSL_GUARDED_BY(mu_);
  int64_t round_number_ ABSL_GUARDED_BY(mu_) = 0;
  // Declared last: destroyed first, so no callback outlives what it uses.
  std::unique_ptr<RolloutEngine> engine_;
};

// Candidates and their verdicts, in the order the report reads them:
// by task, then sample, then turn.
struct Scored {
  std::vector<Job> jobs;
  std::vector<v1::Verdict> verdicts;
};

// --model: K samples per task, then with --turns up to that many turns per
// sample: a trajectory goes on (the rule the mesh applies,
// TrajectoryEnds) with the follow-up prompt the rollout worker would
// render, with the verifier's feedback on its last answer.
absl::StatusOr<Scored> SampleAndVerify(const EvalOptions& options,
                                       const std::vector<v1::Task>& tasks) {
  KF_ASSIGN_OR_RETURN(std::unique_ptr<EvalSampler> sampler, EvalSampler::Create(options));
  KF_ASSIGN_OR_RETURN(std::unique_ptr<LocalFunnel> local, StartLocalFunnel(options));
  v1::MultiTurnSpec spec;
  spec.set_max_turns(options.turns);
  KF_RETURN_IF_ERROR(ApplyProtoDefaults(&spec));
  std::vector<EvalSampler::Request> requests;
  for (size_t t = 0; t < tasks.size(); ++t) {
    KF_ASSIGN_OR_RETURN(std::string prompt, RenderTaskPrompt({}, tasks[t]));
    requests.push_back({.task = t, .count = options.samples, .prompt = std::move(prompt)});
  }
  std::map<std::pair<size_t, int>, std::vector<PastTurn>> past;  // (task, sample) -> turns
  Scored all;
  for (int turn = 0; !requests.empty(); ++turn) {
    KF_ASSIGN_OR_RETURN(std::vector<Job> round, sampler->Sample(requests));
    KF_ASSIGN_OR_RETURN(std::vector<v1::Verdict> verdicts, VerifyAll(options, tasks, round, local.get()));
    requests.clear();
    for (size_t i = 0; i < round.size(); ++i) {
      const Job& job = round[i];
      if (job.completion.has_value() && !TrajectoryEnds(spec, verdicts[i], turn)) {
        std::vector<PastTurn>& turns = past[{job.task, job.sample}];
        turns.push_back({*job.completion,
                         RenderTurnFeedback(verdicts[i], static_cast<size_t>(spec.feedback_max_chars()))});
        absl::StatusOr<std::string> prompt = RenderBoundedFollowUpPrompt(
            {}, tasks[job.task], turns, options.max_sequence_tokens - options.max_new_tokens,
            [&](const std::string& text) { return sampler->CountTokens(text); });
        if (prompt.ok()) {
          requests.push_back({.task = job.task, .first_sample = job.sample, .turn = turn + 1,
                              .prompt = *std::move(prompt)});
        } else {  // as the rollout worker does: that trajectory ends here
          std::fprintf(stderr, "kforge eval: %s sample %d: no turn %d: %s\n",
                       tasks[job.task].id().c_str(), job.sample, turn + 2,
                       std::string(prompt.status().message()).c_str());
        }
      }
      all.jobs.push_back(job);
      all.verdicts.push_back(std::move(verdicts[i]));
    }
  }
  std::vector<size_t> order(all.jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Job& x = all.jobs[a];
    const Job& y = all.jobs[b];
    return std::tie(x.task, x.sample, x.turn) < std::tie(y.task, y.sample, y.turn);
  });
  Scored sorted;
  for (size_t i : order) {
    sorted.jobs.push_back(std::move(all.jobs[i]));
    sorted.verdicts.push_back(std::move(all.verdicts[i]));
  }
  return sorted;
}

}  // namespace

int RunEval(const EvalOptions& given) {
  EvalOptions options = given;
  if (options.candidates_dir.empty() == options.model_dir.empty()) {
    std::fprintf(stderr, "kforge eval: one of --candidates DIR or --model DIR is required\n");
    return kExitConfigError;
  }
  if (options.tasks_dir.empty()) {
    absl::StatusOr<KernelBenchDir> kernelbench = FindKernelBenchDir();
    if (!kernelbench.ok()) {
      std::fprintf(stderr, "kforge eval: no --tasks, and %s\n",
                   std::string(kernelbench.status().message()).c_str());
      return kExitConfigError;
    }
    options.tasks_dir = kernelbench->path;
    std::fprintf(stderr, "kforge eval: tasks from %s (%s)\n", options.tasks_dir.c_str(),
                 kernelbench->found_by.c_str());
  }
  if (options.samples < 1) {
    std::fprintf(stderr, "kforge eval: --samples %d is below 1\n", options.samples);
    return kExitConfigError;
  }
  if (options.turns < 1 || options.turns > 8) {
    std::fprintf(stderr, "kforge eval: --turns %d is outside 1..8\n", options.turns);
    return kExitConfigError;
  }
  if (options.turns > 1 && options.model_dir.empty()) {
    std::fprintf(stderr,
                 "kforge eval: --turns needs --model (candidate files name their turns: "
                 "..._sample_<S>_turn_<T>_kernel.py)\n");
    return kExitConfigError;
  }
  if (options.turns > 1 && options.max_new_tokens >= options.max_sequence_tokens) {
    std::fprintf(stderr, "kforge eval: --max_new_tokens %d leaves no room for a follow-up prompt\n",
                 options.max_new_tokens);
    return kExitConfigError;
  }
  if (options.model_dir.empty() && !fs::is_directory(options.candidates_dir)) {
    std::fprintf(stderr, "kforge eval: --candidates %s: not a folder\n",
                 options.candidates_dir.c_str());
    return kExitConfigError;
  }
  v1::TaskSetSpec spec;
  spec.set_kernelbench_dir(options.tasks_dir);
  for (int level : options.levels) spec.add_levels(level);
  absl::StatusOr<std::vector<v1::Task>> tasks = LoadTaskSet(spec, SharedDataPath("tasks"));
  if (!tasks.ok()) {
    std::fprintf(stderr, "kforge eval: --tasks: %s\n", std::string(tasks.status().message()).c_str());
    return kExitConfigError;
  }
  absl::StatusOr<Scored> scored = [&]() -> absl::StatusOr<Scored> {
    if (!options.model_dir.empty()) return SampleAndVerify(options, *tasks);
    KF_ASSIGN_OR_RETURN(std::vector<Job> read, ReadCandidates(options, *tasks));
    std::fprintf(stderr, "kforge eval: %zu tasks, %zu candidates\n", tasks->size(), read.size());
    KF_ASSIGN_OR_RETURN(std::unique_ptr<LocalFunnel> local, StartLocalFunnel(options));
    KF_ASSIGN_OR_RETURN(std::vector<v1::Verdict> judged,
                        VerifyAll(options, *tasks, read, local.get()));
    return Scored{std::move(read), std::move(judged)};
  }();
  if (!scored.ok()) {
    std::fprintf(stderr, "kforge eval: %s\n", std::string(scored.status().message()).c_str());
    return kExitRuntimeError;
  }
  const std::vector<Job>* jobs = &scored->jobs;
  const std::vector<v1::Verdict>* verdicts = &scored->verdicts;
  std::vector<TaskVerdicts> by_task(tasks->size());
  for (size_t t = 0; t < tasks->size(); ++t) {
    by_task[t].task_id = (*tasks)[t].id();
    by_task[t].level = (*tasks)[t].level();
  }
  std::map<size_t, std::map<int, size_t>> sample_index;  // task -> sample -> trajectory
  // Multi-turn candidates (a file with a _turn_<T> above 0, or --turns):
  // each sample's verdicts by turn, in order (jobs come sorted by sample,
  // then turn). With --turns the table by turn is there even when every
  // trajectory ended at its first turn.
  const bool multi_turn =
      options.turns > 1 ||
      std::any_of(jobs->begin(), jobs->end(), [](const Job& job) { return job.turn > 0; });
  int most_samples = 1;
  for (size_t i = 0; i < jobs->size(); ++i) {
    const Job& job = (*jobs)[i];
    TaskVerdicts& task = by_task[job.task];
    if (!multi_turn) {
      task.verdicts.push_back((*verdicts)[i]);
    } else {
      std::map<int, size_t>& index = sample_index[job.task];
      auto [it, fresh] = index.emplace(job.sample, task.turns.size());
      if (fresh) task.turns.emplace_back();
      task.turns[it->second].push_back((*verdicts)[i]);
    }
    most_samples = std::max(
        most_samples, static_cast<int>(multi_turn ? task.turns.size() : task.verdicts.size()));
  }
  EvalSummaryOptions summary;
  summary.ks.clear();
  for (int k : {1, 5, 10, 100}) {
    if (k < most_samples) summary.ks.push_back(k);
  }
  summary.ks.push_back(most_samples);
  v1::EvalReport report = SummarizeEval(by_task, summary);
  report.set_source(options.model_dir.empty() ? options.candidates_dir : options.model_dir);
  report.set_tasks(options.tasks_dir);
  if (!options.out_dir.empty()) {
    if (absl::Status s = WriteOutputs(options.out_dir, report); !s.ok()) {
      std::fprintf(stderr, "kforge eval: %s\n", std::string(s.message()).c_str());
      return kExitRuntimeError;
    }
  }
  std::printf("%s", options.json ? (ToJson(report) + "\n").c_str() : EvalMarkdown(report).c_str());
  return kExitOk;
}

}  // namespace kforge
