#include "learner/curriculum/curriculum.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

// The trigger needs at least this many level-1 outcomes (or the whole window
// when it is smaller), and at least 1 / kTriggerWindowFraction of the window.
constexpr int64_t kMinTriggerOutcomes = 16;
constexpr int64_t kTriggerWindowFraction = 4;

// The 53 high bits of a 64-bit draw as a double in [0, 1).
constexpr int kDoubleMantissaBits = 53;

}  // namespace

int64_t Curriculum::MinTriggerOutcomes(int32_t window) {
  return std::min<int64_t>(window,
                           std::max<int64_t>(kMinTriggerOutcomes, window / kTriggerWindowFraction));
}

absl::StatusOr<std::unique_ptr<Curriculum>> Curriculum::Create(const v1::CurriculumSpec& spec,
                                                               std::vector<v1::Task> tasks,
                                                               uint64_t seed) {
  if (tasks.empty()) return absl::InvalidArgumentError("curriculum: no training tasks");
  if (spec.window() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("curriculum.window must be at least 1, got ", spec.window()));
  }
  if (spec.ramp_steps() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("curriculum.ramp_steps must be at least 1, got ", spec.ramp_steps()));
  }
  std::sort(tasks.begin(), tasks.end(),
            [](const v1::Task& a, const v1::Task& b) { return a.id() < b.id(); });
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].level() < 1) {
      return absl::InvalidArgumentError(absl::StrCat("curriculum: task ", tasks[i].id(),
                                                     " has level ", tasks[i].level(),
                                                     "; training tasks have level >= 1"));
    }
    if (i > 0 && tasks[i].id() == tasks[i - 1].id()) {
      return absl::InvalidArgumentError(
          absl::StrCat("curriculum: task id ", tasks[i].id(), " appears more than once"));
    }
  }
  return std::unique_ptr<Curriculum>(new Curriculum(spec, std::move(tasks), seed));
}

Curriculum::Curriculum(const v1::CurriculumSpec& spec, std::vector<v1::Task> tasks, uint64_t seed)
    : spec_(spec),
      tasks_(std::move(tasks)),
      rng_(seed),
      attempts_(tasks_.size(), 0),
      correct_(tasks_.size(), 0) {
  for (size_t i = 0; i < tasks_.size(); ++i) {
    index_by_id_[tasks_[i].id()] = i;
    (tasks_[i].level() == 1 ? level1_ : upper_).push_back(i);
  }
}

std::vector<const v1::Task*> Curriculum::Draw(int n) {
  absl::MutexLock lock(&mu_);
  std::vector<const v1::Task*> drawn;
  // Tasks of each level not yet drawn in this draw; refilled when used up.
  std::vector<size_t> pools[2] = {level1_, upper_};
  const double share = ShareLocked();
  for (int pick = 0; pick < n; ++pick) {
    const bool upper = level1_.empty() || (!upper_.empty() && BernoulliLocked(share));
    std::vector<size_t>& pool = pools[upper ? 1 : 0];
    if (pool.empty()) pool = upper ? upper_ : level1_;
    const size_t at = UniformIndexLocked(pool.size());
    drawn.push_back(&tasks_[pool[at]]);
    pool[at] = pool.back();
    pool.pop_back();
  }
  return drawn;
}

void Curriculum::Record(const v1::Task& task, bool correct) {
  absl::MutexLock lock(&mu_);
  const auto it = index_by_id_.find(task.id());
  if (it == index_by_id_.end()) return;
  ++attempts_[it->second];
  if (correct) ++correct_[it->second];
  if (tasks_[it->second].level() != 1) return;

  window_.push_back(correct);
  window_correct_ += correct ? 1 : 0;
  if (window_.size() > static_cast<size_t>(spec_.window())) {
    window_correct_ -= window_.front() ? 1 : 0;
    window_.pop_front();
  }
  if (triggered_at_step_ < 0 &&
      static_cast<int64_t>(window_.size()) >= MinTriggerOutcomes(spec_.window()) &&
      PassRateLocked() > spec_.level1_pass_rate_trigger()) {
    triggered_at_step_ = step_;
  }
}

void Curriculum::EndStep() {
  absl::MutexLock lock(&mu_);
  ++step_;
}

double Curriculum::level2_share() const {
  absl::MutexLock lock(&mu_);
  return ShareLocked();
}

double Curriculum::level1_pass_rate() const {
  absl::MutexLock lock(&mu_);
  return PassRateLocked();
}

int64_t Curriculum::triggered_at_step() const {
  absl::MutexLock lock(&mu_);
  return triggered_at_step_;
}

std::vector<v1::TaskSolveStats> Curriculum::task_stats() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::TaskSolveStats> stats(tasks_.size());
  for (size_t i = 0; i < tasks_.size(); ++i) {
    stats[i].set_task_id(tasks_[i].id());
    stats[i].set_level(tasks_[i].level());
    stats[i].set_attempts(attempts_[i]);
    stats[i].set_correct(correct_[i]);
  }
  return stats;
}

double Curriculum::ShareLocked() const {
  if (triggered_at_step_ < 0) return spec_.level2_share_start();
  const double progress =
      std::min(1.0, static_cast<double>(step_ - triggered_at_step_) / spec_.ramp_steps());
  return spec_.level2_share_start() +
         (spec_.level2_share_end() - spec_.level2_share_start()) * progress;
}

double Curriculum::PassRateLocked() const {
  if (window_.empty()) return 0;
  return static_cast<double>(window_correct_) / static_cast<double>(window_.size());
}

size_t Curriculum::UniformIndexLocked(size_t n) {
  // Rejection keeps every index equally likely (no modulo bias).
  const uint64_t limit = std::numeric_limits<uint64_t>::max() / n * n;
  uint64_t x;
  do {
    x = rng_();
  } while (x >= limit);
  return static_cast<size_t>(x % n);
}

bool Curriculum::BernoulliLocked(double p) {
  const double u = static_cast<double>(rng_() >> (64 - kDoubleMantissaBits)) /
                   static_cast<double>(uint64_t{1} << kDoubleMantissaBits);
  return u < p;
}

v1::CurriculumState Curriculum::Save() const {
  absl::MutexLock lock(&mu_);
  v1::CurriculumState state;
  for (bool outcome : window_) state.add_level1_window(outcome);
  state.set_triggered_at_step(triggered_at_step_);
  state.set_step(step_);
  std::ostringstream rng;
  rng << rng_;
  state.set_rng_state(rng.str());
  for (size_t i = 0; i < tasks_.size(); ++i) {
    v1::TaskSolveStats* stats = state.add_tasks();
    stats->set_task_id(tasks_[i].id());
    stats->set_level(tasks_[i].level());
    stats->set_attempts(attempts_[i]);
    stats->set_correct(correct_[i]);
  }
  return state;
}

absl::Status Curriculum::Restore(const v1::CurriculumState& state) {
  std::mt19937_64 rng;
  std::istringstream in(state.rng_state());
  in >> rng;
  if (state.rng_state().empty() || in.fail()) {
    return absl::InvalidArgumentError(
        "curriculum state: rng_state is not a std::mt19937_64 state");
  }
  if (state.step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("curriculum state: step is negative (", state.step(), ")"));
  }
  if (state.triggered_at_step() < -1 || state.triggered_at_step() > state.step()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "curriculum state: triggered_at_step ", state.triggered_at_step(),
        " is neither -1 nor in [0, step = ", state.step(), "]"));
  }
  std::vector<int64_t> attempts(tasks_.size(), 0);
  std::vector<int64_t> correct(tasks_.size(), 0);
  for (const v1::TaskSolveStats& stats : state.tasks()) {
    if (stats.attempts() < 0 || stats.correct() < 0 || stats.correct() > stats.attempts()) {
      return absl::InvalidArgumentError(
          absl::StrCat("curriculum state: task ", stats.task_id(), " has ", stats.correct(),
                       " correct of ", stats.attempts(), " attempts"));
    }
    const auto it = index_by_id_.find(stats.task_id());
    if (it == index_by_id_.end()) continue;  // no longer in the set: dropped
    attempts[it->second] = stats.attempts();
    correct[it->second] = stats.correct();
  }
  // A window saved under a larger spec.window keeps its newest outcomes.
  const int first = std::max(0, state.level1_window_size() - spec_.window());
  std::deque<bool> window(state.level1_window().begin() + first, state.level1_window().end());

  absl::MutexLock lock(&mu_);
  rng_ = rng;
  window_ = std::move(window);
  window_correct_ = std::count(window_.begin(), window_.end(), true);
  step_ = state.step();
  triggered_at_step_ = state.triggered_at_step();
  attempts_ = std::move(attempts);
  correct_ = std::move(correct);
  return absl::OkStatus();
}

}  // namespace kforge
