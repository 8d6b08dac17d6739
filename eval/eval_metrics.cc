#include "eval/eval_metrics.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kforge {
namespace {

bool Correct(const v1::Verdict& v) { return v.correct() && v.hack_flags_size() == 0; }

bool Compiled(const v1::Verdict& v) {
  for (const v1::StageResult& stage : v.stages()) {
    if (stage.stage() == v1::STAGE_COMPILE) return stage.outcome() == v1::OUTCOME_PASSED;
  }
  return false;
}

std::string FirstFailure(const v1::Verdict& v) {
  for (const v1::StageResult& stage : v.stages()) {
    if (stage.outcome() != v1::OUTCOME_PASSED && stage.outcome() != v1::OUTCOME_SKIPPED) {
      return absl::StrCat(v1::Stage_Name(stage.stage()), ": ", stage.message());
    }
  }
  return "";
}

v1::TaskEval EvaluateTask(const TaskVerdicts& task) {
  v1::TaskEval out;
  out.set_task_id(task.task_id);
  out.set_level(task.level);
  out.set_samples(static_cast<int32_t>(task.verdicts.size()));
  for (const v1::Verdict& v : task.verdicts) {
    out.set_compiled(out.compiled() + (Compiled(v) ? 1 : 0));
    if (!Correct(v)) continue;
    out.set_correct(out.correct() + 1);
    out.set_best_speedup_vs_eager(std::max(out.best_speedup_vs_eager(), v.speedup_vs_eager()));
    out.set_best_speedup_vs_compile(
        std::max(out.best_speedup_vs_compile(), v.speedup_vs_compile()));
  }
  if (!task.verdicts.empty()) out.set_first_failure(FirstFailure(task.verdicts.front()));
  return out;
}

// A figure whose baseline never ran is not a speedup of 0.
constexpr const char* kNotMeasured = "n/a";

// A geometric mean of speedups is positive; 0 is the mean of none (LevelEval).
std::string Speedup(double geomean) {
  return geomean > 0 ? absl::StrFormat("%.2fx", geomean) : kNotMeasured;
}

double GeoMean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double log_sum = 0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / static_cast<double>(values.size()));
}

v1::LevelEval Aggregate(int level, const std::vector<const v1::TaskEval*>& tasks,
                        const EvalSummaryOptions& options) {
  v1::LevelEval out;
  out.set_level(level);
  out.set_tasks(static_cast<int32_t>(tasks.size()));
  int samples = 0, compiled = 0, correct = 0;
  int min_samples = tasks.empty() ? 0 : tasks.front()->samples();
  std::vector<double> eager, compile;
  for (const v1::TaskEval* t : tasks) {
    samples += t->samples();
    compiled += t->compiled();
    correct += t->correct();
    min_samples = std::min(min_samples, t->samples());
    if (t->best_speedup_vs_eager() > 0) eager.push_back(t->best_speedup_vs_eager());
    if (t->best_speedup_vs_compile() > 0) compile.push_back(t->best_speedup_vs_compile());
  }
  out.set_samples(samples);
  out.set_compile_rate(samples > 0 ? static_cast<double>(compiled) / samples : 0);
  out.set_correct_rate(samples > 0 ? static_cast<double>(correct) / samples : 0);
  for (int k : options.ks) {
    if (tasks.empty() || k < 1 || k > min_samples) continue;
    double sum = 0;
    for (const v1::TaskEval* t : tasks) sum += PassAtK(t->samples(), t->correct(), k);
    (*out.mutable_pass_at_k())[k] = sum / static_cast<double>(tasks.size());
  }
  for (const std::string& p_text : options.fast_ps) {
    double p = 0;
    if (!absl::SimpleAtod(p_text, &p)) continue;
    int fast = 0;
    for (const v1::TaskEval* t : tasks) {
      if (t->correct() == 0) continue;
      // fast_0 counts every solved task, timed or not.
      if (p == 0 || t->best_speedup_vs_eager() > p) ++fast;
    }
    (*out.mutable_fast_p())[p_text] =
        tasks.empty() ? 0 : static_cast<double>(fast) / static_cast<double>(tasks.size());
  }
  out.set_geomean_speedup_vs_eager(GeoMean(eager));
  out.set_geomean_speedup_vs_compile(GeoMean(compile));
  out.set_timed_tasks(static_cast<int32_t>(eager.size()));
  return out;
}

}  // namespace

double PassAtK(int n, int c, int k) {
  if (k > n || k < 1 || n < 1) return 0;
  if (n - c < k) return 1;
  // C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i)
  double fail = 1;
  for (int i = n - c + 1; i <= n; ++i) fail *= 1.0 - static_cast<double>(k) / i;
  return 1 - fail;
}

v1::Verdict BestByTurn(const std::vector<v1::Verdict>& turns, size_t turn) {
  if (turns.empty()) return v1::Verdict();
  const size_t last = std::min(turn, turns.size() - 1);
  size_t best = last;
  bool found = false;
  for (size_t t = 0; t <= last; ++t) {
    if (!Correct(turns[t])) continue;
    if (!found || turns[t].speedup_vs_eager() > turns[best].speedup_vs_eager()) best = t;
    found = true;
  }
  return turns[best];
}

namespace {

// The tasks with each sample's best answer by turn `turn` as its verdict.
std::vector<TaskVerdicts> ByTurn(const std::vector<TaskVerdicts>& tasks, size_t turn) {
  std::vector<TaskVerdicts> out;
  for (const TaskVerdicts& task : tasks) {
    TaskVerdicts at{.task_id = task.task_id, .level = task.level, .verdicts = task.verdicts};
    if (!task.turns.empty()) {
      at.verdicts.clear();
      for (const std::vector<v1::Verdict>& trajectory : task.turns) {
        at.verdicts.push_back(BestByTurn(trajectory, turn));
      }
    }
    out.push_back(std::move(at));
  }
  return out;
}

v1::EvalReport SummarizeTurns(const std::vector<TaskVerdicts>& tasks,
                              const EvalSummaryOptions& options);

}  // namespace

v1::EvalReport SummarizeEval(const std::vector<TaskVerdicts>& given,
                             const EvalSummaryOptions& options) {
  size_t turns = 0;
  for (const TaskVerdicts& task : given) {
    for (const std::vector<v1::Verdict>& trajectory : task.turns) {
      turns = std::max(turns, trajectory.size());
    }
  }
  // Multi-turn: the headline figures are of the best answer over all turns.
  const std::vector<TaskVerdicts> tasks =
      turns > 0 ? ByTurn(given, turns - 1) : std::vector<TaskVerdicts>(given);
  v1::EvalReport report = SummarizeTurns(tasks, options);
  if (turns > 1) {
    for (size_t t = 0; t < turns; ++t) {
      v1::TurnEval* by_turn = report.add_turns();
      by_turn->set_turn(static_cast<int32_t>(t));
      *by_turn->mutable_overall() = SummarizeTurns(ByTurn(given, t), options).overall();
    }
  }
  return report;
}

namespace {

// SummarizeEval of single-turn verdicts.
v1::EvalReport SummarizeTurns(const std::vector<TaskVerdicts>& tasks,
                              const EvalSummaryOptions& options) {
  v1::EvalReport report;
  for (const TaskVerdicts& task : tasks) *report.add_task_results() = EvaluateTask(task);
  std::map<int, std::vector<const v1::TaskEval*>> by_level;
  std::vector<const v1::TaskEval*> all;
  for (const v1::TaskEval& t : report.task_results()) {
    by_level[t.level()].push_back(&t);
    all.push_back(&t);
  }
  for (const auto& [level, level_tasks] : by_level) {
    *report.add_levels() = Aggregate(level, level_tasks, options);
  }
  *report.mutable_overall() = Aggregate(0, all, options);
  return report;
}

}  // namespace

std::string EvalMarkdown(const v1::EvalReport& report) {
  // Columns "n/a": the baseline never ran (timed 0), so there is no figure.
  std::vector<int> ks;
  for (const auto& [k, value] : report.overall().pass_at_k()) ks.push_back(k);
  std::sort(ks.begin(), ks.end());
  const std::vector<std::string> ps = {"0", "1", "1.5", "2"};
  std::string out;
  // A table's header, its first column named `first`.
  auto header = [&](const std::string& first) {
    absl::StrAppend(&out, "| ", first, " | tasks | samples | compiled | correct |");
    for (int k : ks) absl::StrAppend(&out, " pass@", k, " |");
    for (const std::string& p : ps) absl::StrAppend(&out, " fast_", p, " |");
    absl::StrAppend(&out, " geomean vs eager | geomean vs compile | timed |\n|");
    for (size_t i = 0; i < 8 + ks.size() + ps.size(); ++i) absl::StrAppend(&out, "---|");
    absl::StrAppend(&out, "\n");
  };
  header("level");
  auto row = [&](const v1::LevelEval& l, const std::string& name) {
    absl::StrAppend(&out, "| ", name, " | ", l.tasks(), " | ", l.samples(), " | ",
                    absl::StrFormat("%.1f%%", 100 * l.compile_rate()), " | ",
                    absl::StrFormat("%.1f%%", 100 * l.correct_rate()), " |");
    for (int k : ks) {
      auto it = l.pass_at_k().find(k);
      absl::StrAppend(&out, " ", it == l.pass_at_k().end() ? "-" : absl::StrFormat("%.3f", it->second), " |");
    }
    // Solved tasks that were never timed leave fast_p above 0 unmeasured;
    // with nothing solved, 0 is the measured answer.
    const bool speed_unmeasured = l.timed_tasks() == 0 && l.fast_p().contains("0") &&
                                  l.fast_p().at("0") > 0;
    for (const std::string& p : ps) {
      auto it = l.fast_p().find(p);
      absl::StrAppend(&out, " ",
                      it == l.fast_p().end()             ? "-"
                      : p != "0" && speed_unmeasured     ? kNotMeasured
                                                         : absl::StrFormat("%.3f", it->second),
                      " |");
    }
    absl::StrAppend(&out, " ", Speedup(l.geomean_speedup_vs_eager()), " | ",
                    Speedup(l.geomean_speedup_vs_compile()), " | ",
                    l.timed_tasks(), " |\n");
  };
  for (const v1::LevelEval& l : report.levels()) row(l, absl::StrCat(l.level()));
  row(report.overall(), "all");
  if (report.turns().empty()) return out;
  // Multi-turn: every task, by turn (the best answer so far of each sample).
  absl::StrAppend(&out, "\nBy turn (each sample's best answer so far):\n\n");
  header("turn");
  for (const v1::TurnEval& t : report.turns()) row(t.overall(), absl::StrCat(t.turn() + 1));
  return out;
}

}  // namespace kforge
