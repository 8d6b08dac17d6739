// `kforge eval (--candidates DIR | --model DIR) [--tasks DIR] [--levels 1,2]
//              [--samples K] [--server HOST:PORT] [--out DIR] [--json]`
// samples K completions per task from a model (greedy for K = 1, the job
// prompt template's defaults, continuous batching on --device), or takes a
// folder of candidate files, one or more per task, and scores them with the same
// verifier funnel that rewards training, and reports KernelBench's figures
// per level (eval/eval_metrics.h): compile and correct rates, pass@k, fast_p
// and geometric-mean speedups. Candidates are found as
//   DIR/<task id>.py                       (DIR/level1/19_ReLU.py), or
//   DIR/level_<L>_problem_<N>_sample_<S>_kernel.py  (KernelBench's run naming;
//                                           N is the task file's number)
// so other systems' outputs are scored the same way. Multi-turn candidates
// (issue 24) add the turn: level_<L>_problem_<N>_sample_<S>_turn_<T>_kernel.py
// (T from 0); with any turn above 0 every sample counts with its best
// answer over its turns, and the report adds pass@k and fast_p by turn
// (EvalReport.turns; a "By turn" table). With --model, --turns N samples
// up to N turns per sample the same way a multi-turn job does (the
// follow-up prompt with the verifier's feedback; a correct, fast-enough
// answer ends a trajectory) and reports them by turn. A task without a
// candidate counts as one failed sample. Verification runs in process (a
// zygote and reference server of its own, `--concurrency` at once) or on a
// remote verifier (--server, a list or dns:/// name, many at once).
// Without --tasks, the KernelBench problems where FindKernelBenchDir finds
// them (common/paths/kernelbench_dir.h: KFORGE_KERNELBENCH_DIR, the fetched
// copy, ../shared/kernelbench). A speed figure whose baseline never ran (no
// torch.compile on LibTorch 1.13, timing off) is "n/a", not 0.00x.
// Prints a Markdown table (or, with --json, the EvalReport as JSON); --out
// also writes report.json, report.md and the charts speedup_histogram.svg,
// pass_at_k.svg and fast_p.svg (eval/eval_plots.h) there.
// Exit code 0 when it ran, 1 when verification could not run, 2 for bad
// arguments.
#ifndef KFORGE_CLI_EVAL_COMMAND_H_
#define KFORGE_CLI_EVAL_COMMAND_H_

#include <string>
#include <vector>

#include "common/security/channel_security.h"

namespace kforge {

struct EvalOptions {
  std::string candidates_dir;  // one of these two
  std::string model_dir;
  int samples = 1;             // per task, with --model
  // With --model: turns per sample at most (1..8). Past the first, a
  // sample whose trajectory has not ended (prompts/trajectory_end.h, with
  // MultiTurnSpec's defaults for the rest) gets the follow-up prompt the
  // rollout worker would render, with the verifier's feedback.
  int turns = 1;
  double temperature = 0.8;    // with --model and samples > 1 (K = 1 is greedy)
  int max_new_tokens = 1024;
  int max_sequence_tokens = 8192;
  std::string tasks_dir;      // empty: FindKernelBenchDir()
  std::vector<int> levels;   // empty: every level found
  std::string server;        // empty: in process
  ChannelSecurity security;  // towards --server: a mesh peer's certificate or service token
  std::string out_dir;       // empty: print only
  std::string python;
  std::string device = "cpu";
  bool require_triton = true;
  int concurrency = 2;
  bool json = false;
};

int RunEval(const EvalOptions& options);

}  // namespace kforge

#endif  // KFORGE_CLI_EVAL_COMMAND_H_
