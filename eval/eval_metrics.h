// KernelBench-style figures from verdicts: compile and correctness rates,
// unbiased pass@k, fast_p and geometric-mean speedups, per level and overall.
//
//   std::vector<TaskVerdicts> results = ...;   // one entry per task
//   v1::EvalReport report = SummarizeEval(results, {.ks = {1, 5}});
//
// A sample counts as correct only when the verdict says so and carries no
// hacking flag; its speedup counts only when it was timed (speedup > 0).
// No LibTorch, no gRPC: the CLI and the learner share it.
#ifndef KFORGE_EVAL_EVAL_METRICS_H_
#define KFORGE_EVAL_EVAL_METRICS_H_

#include <string>
#include <vector>

#include "kforge/v1/eval.pb.h"
#include "kforge/v1/verdict.pb.h"

namespace kforge {

struct TaskVerdicts {
  std::string task_id;
  int level = 1;
  std::vector<v1::Verdict> verdicts;  // one per sample
  // Multi-turn candidates (issue 24): per sample, its turns' verdicts, turn
  // 0 first. When set, `verdicts` is ignored: each sample counts with its
  // best answer over its turns (BestByTurn), and the report gets the
  // figures of each turn (EvalReport.turns).
  std::vector<std::vector<v1::Verdict>> turns;
};

struct EvalSummaryOptions {
  std::vector<int> ks = {1};                     // pass@k for each k <= samples
  std::vector<std::string> fast_ps = {"0", "1", "1.5", "2"};
};

// 1 - C(n - c, k) / C(n, k), computed as a product so large n stay exact
// enough: the chance that at least one of k samples drawn without
// replacement from n (c of them correct) is correct. 0 when k > n.
double PassAtK(int n, int c, int k);

// A trajectory's best answer by turn `turn` (of turns[0 .. turn], fewer
// when it ended sooner): the correct one without hack flags with the
// highest speedup over eager (the earliest among equals), else the last.
// An empty trajectory gives an empty verdict (a failure).
v1::Verdict BestByTurn(const std::vector<v1::Verdict>& turns, size_t turn);

v1::EvalReport SummarizeEval(const std::vector<TaskVerdicts>& tasks,
                             const EvalSummaryOptions& options = {});

// The report as a Markdown table (one row per level, then overall). A
// speed figure whose baseline never ran is "n/a": a geometric mean over no
// timed task (0 in the report), and fast_p above 0 where tasks were solved
// but none timed. A multi-turn report adds a table by turn (correct rate,
// pass@k and fast_p of the best answer by each turn).
std::string EvalMarkdown(const v1::EvalReport& report);

}  // namespace kforge

#endif  // KFORGE_EVAL_EVAL_METRICS_H_
