// Evaluation figures against values worked out by hand on fixed verdicts.
#include "eval/eval_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kforge {
namespace {

using ::testing::HasSubstr;

v1::Verdict Verdict(bool compiled, bool correct, double speedup = 0, bool flagged = false) {
  v1::Verdict v;
  v1::StageResult* stat = v.add_stages();
  stat->set_stage(v1::STAGE_STATIC);
  stat->set_outcome(compiled ? v1::OUTCOME_PASSED : v1::OUTCOME_FAILED);
  if (!compiled) stat->set_message("no ModelNew");
  if (compiled) {
    v1::StageResult* compile = v.add_stages();
    compile->set_stage(v1::STAGE_COMPILE);
    compile->set_outcome(v1::OUTCOME_PASSED);
  }
  v.set_correct(correct);
  v.set_speedup_vs_eager(speedup);
  v.set_speedup_vs_compile(speedup / 2);
  if (flagged) v.add_hack_flags(v1::HACK_TORCH_FALLBACK);
  return v;
}

TEST(PassAtKTest, MatchesTheCombinatorialDefinition) {
  EXPECT_DOUBLE_EQ(PassAtK(5, 2, 1), 0.4);
  EXPECT_NEAR(PassAtK(5, 2, 2), 1.0 - 3.0 / 10.0, 1e-12);   // 1 - C(3,2)/C(5,2)
  EXPECT_NEAR(PassAtK(10, 3, 5), 1.0 - 21.0 / 252.0, 1e-12);  // 1 - C(7,5)/C(10,5)
  EXPECT_DOUBLE_EQ(PassAtK(5, 0, 1), 0.0);
  EXPECT_DOUBLE_EQ(PassAtK(3, 3, 2), 1.0);
  EXPECT_DOUBLE_EQ(PassAtK(4, 2, 3), 1.0);  // only 2 wrong: any 3 hold a right one
  EXPECT_DOUBLE_EQ(PassAtK(2, 1, 3), 0.0);  // k > n is not defined: reported as 0
}

TEST(SummarizeEvalTest, LevelsAndOverallMatchHandComputedFigures) {
  std::vector<TaskVerdicts> tasks = {
      {"level1/A", 1, {Verdict(true, true, 2.0), Verdict(true, false)}},
      {"level1/B", 1, {Verdict(false, false), Verdict(true, true, 0.5)}},
      {"level2/C", 2, {Verdict(true, true, 3.0, /*flagged=*/true), Verdict(false, false)}},
  };
  const v1::EvalReport report = SummarizeEval(tasks, {.ks = {1, 2, 3}});
  ASSERT_EQ(report.levels_size(), 2);
  const v1::LevelEval& l1 = report.levels(0);
  EXPECT_EQ(l1.level(), 1);
  EXPECT_EQ(l1.tasks(), 2);
  EXPECT_EQ(l1.samples(), 4);
  EXPECT_DOUBLE_EQ(l1.compile_rate(), 0.75);
  EXPECT_DOUBLE_EQ(l1.correct_rate(), 0.5);
  EXPECT_DOUBLE_EQ(l1.pass_at_k().at(1), 0.5);
  EXPECT_DOUBLE_EQ(l1.pass_at_k().at(2), 1.0);
  EXPECT_FALSE(l1.pass_at_k().contains(3)) << "pass@3 with 2 samples per task";
  EXPECT_DOUBLE_EQ(l1.fast_p().at("0"), 1.0);
  EXPECT_DOUBLE_EQ(l1.fast_p().at("1"), 0.5);
  EXPECT_DOUBLE_EQ(l1.fast_p().at("1.5"), 0.5);
  EXPECT_DOUBLE_EQ(l1.fast_p().at("2"), 0.0);  // 2.0 is not faster than 2x
  EXPECT_NEAR(l1.geomean_speedup_vs_eager(), 1.0, 1e-12);  // sqrt(2 * 0.5)
  EXPECT_NEAR(l1.geomean_speedup_vs_compile(), 0.5, 1e-12);
  EXPECT_EQ(l1.timed_tasks(), 2);

  const v1::LevelEval& l2 = report.levels(1);
  EXPECT_DOUBLE_EQ(l2.compile_rate(), 0.5);
  EXPECT_DOUBLE_EQ(l2.correct_rate(), 0.0) << "a flagged verdict is not correct";
  EXPECT_DOUBLE_EQ(l2.fast_p().at("0"), 0.0);
  EXPECT_EQ(l2.geomean_speedup_vs_eager(), 0.0);
  EXPECT_EQ(l2.timed_tasks(), 0);

  const v1::LevelEval& all = report.overall();
  EXPECT_EQ(all.tasks(), 3);
  EXPECT_NEAR(all.compile_rate(), 4.0 / 6.0, 1e-12);
  EXPECT_NEAR(all.correct_rate(), 2.0 / 6.0, 1e-12);
  EXPECT_NEAR(all.pass_at_k().at(1), 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(all.fast_p().at("0"), 2.0 / 3.0, 1e-12);

  ASSERT_EQ(report.task_results_size(), 3);
  EXPECT_EQ(report.task_results(1).first_failure(), "STAGE_STATIC: no ModelNew");
  const std::string markdown = EvalMarkdown(report);
  EXPECT_THAT(markdown, HasSubstr("| 1 | 2 | 4 | 75.0% | 50.0% | 0.500 | 1.000 |"));
  EXPECT_THAT(markdown, HasSubstr("| all | 3 | 6 |"));
}

// Multi-turn candidates (issue 24), two tasks of two trajectories each:
//   A/0: fail, correct 0.8x, correct 1.6x    A/1: correct 1.2x (ended)
//   B/0: fail, fail, fail                    B/1: fail, correct 2.5x
// Each sample counts by turn k with its best answer so far.
TEST(SummarizeEvalTest, MultiTurnCandidatesGetPassAtKAndFastPByTurn) {
  TaskVerdicts a{.task_id = "level1/A", .level = 1};
  a.turns = {{Verdict(true, false), Verdict(true, true, 0.8), Verdict(true, true, 1.6)},
             {Verdict(true, true, 1.2)}};
  TaskVerdicts b{.task_id = "level1/B", .level = 1};
  b.turns = {{Verdict(true, false), Verdict(false, false), Verdict(true, false)},
             {Verdict(true, false), Verdict(true, true, 2.5)}};
  const v1::EvalReport report = SummarizeEval({a, b}, {.ks = {1, 2}});
  ASSERT_EQ(report.turns_size(), 3);
  struct Expected {
    double correct, pass1, pass2, fast0, fast1, fast15, fast2;
  };
  const Expected expected[] = {
      {0.25, 0.25, 0.5, 0.5, 0.5, 0.0, 0.0},  // turn 1: only A/1
      {0.75, 0.75, 1.0, 1.0, 1.0, 0.5, 0.5},  // turn 2: A best 1.2x, B 2.5x
      {0.75, 0.75, 1.0, 1.0, 1.0, 1.0, 0.5},  // turn 3: A best 1.6x
  };
  for (int t = 0; t < 3; ++t) {
    const v1::LevelEval& o = report.turns(t).overall();
    EXPECT_EQ(report.turns(t).turn(), t);
    EXPECT_EQ(o.samples(), 4) << t;
    EXPECT_DOUBLE_EQ(o.correct_rate(), expected[t].correct) << t;
    EXPECT_DOUBLE_EQ(o.pass_at_k().at(1), expected[t].pass1) << t;
    EXPECT_DOUBLE_EQ(o.pass_at_k().at(2), expected[t].pass2) << t;
    EXPECT_DOUBLE_EQ(o.fast_p().at("0"), expected[t].fast0) << t;
    EXPECT_DOUBLE_EQ(o.fast_p().at("1"), expected[t].fast1) << t;
    EXPECT_DOUBLE_EQ(o.fast_p().at("1.5"), expected[t].fast15) << t;
    EXPECT_DOUBLE_EQ(o.fast_p().at("2"), expected[t].fast2) << t;
  }
  // The headline figures are the last turn's.
  EXPECT_DOUBLE_EQ(report.overall().pass_at_k().at(1), 0.75);
  EXPECT_DOUBLE_EQ(report.overall().fast_p().at("1.5"), 1.0);
  EXPECT_EQ(report.task_results(0).best_speedup_vs_eager(), 1.6);
  const std::string markdown = EvalMarkdown(report);
  EXPECT_THAT(markdown, HasSubstr("By turn"));
  EXPECT_THAT(markdown, HasSubstr("| 1 | 2 | 4 | 100.0% | 25.0% | 0.250 | 0.500 |"));
  EXPECT_THAT(markdown, HasSubstr("| 3 | 2 | 4 |"));
}

TEST(SummarizeEvalTest, SingleTurnEvaluationsHaveNoTurnTable) {
  const v1::EvalReport report = SummarizeEval({{"level1/A", 1, {Verdict(true, true, 2.0)}}});
  EXPECT_EQ(report.turns_size(), 0);
  EXPECT_THAT(EvalMarkdown(report), ::testing::Not(HasSubstr("By turn")));
}

TEST(EvalMarkdownTest, AFigureWhoseBaselineNeverRanIsNotAvailableRatherThanZero) {
  // Level 1 timed against eager only (no torch.compile, as LibTorch 1.13);
  // level 2 solved but never timed (timing off); level 3 solved nothing.
  v1::Verdict eager_only = Verdict(true, true, 1.5);
  eager_only.set_speedup_vs_compile(0);
  std::vector<TaskVerdicts> tasks = {
      {"level1/A", 1, {eager_only}},
      {"level2/B", 2, {Verdict(true, true, /*speedup=*/0)}},
      {"level3/C", 3, {Verdict(true, false)}},
  };
  const v1::EvalReport report = SummarizeEval(tasks);
  EXPECT_EQ(report.levels(0).timed_tasks(), 1);
  EXPECT_EQ(report.levels(0).geomean_speedup_vs_compile(), 0);
  const std::string markdown = EvalMarkdown(report);
  // fast_0 fast_1 fast_1.5 fast_2 | vs eager | vs compile | timed
  EXPECT_THAT(markdown, HasSubstr("| 1.000 | 1.000 | 0.000 | 0.000 | 1.50x | n/a | 1 |"));
  EXPECT_THAT(markdown, HasSubstr("| 1.000 | n/a | n/a | n/a | n/a | n/a | 0 |"));
  EXPECT_THAT(markdown, HasSubstr("| 0.000 | 0.000 | 0.000 | 0.000 | n/a | n/a | 0 |"));
  EXPECT_THAT(markdown, ::testing::Not(HasSubstr("0.00x")));
}

}  // namespace
}  // namespace kforge
