// A job's curves read back from the SVG: the warm-start loss, the reward
// per step under its moving average, every funnel stage's pass rate, and
// held-out rates only where a round ran, all on one step axis.
#include "eval/training_curves.h"

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/eval/svg_reading.h"

namespace kforge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<double> Steps(const std::vector<ChartPoint>& pixels, const Rect& area, double last) {
  std::vector<double> steps;
  for (const ChartPoint& px : pixels) steps.push_back(std::round(DataX(area, px.x, 0, last)));
  return steps;
}

// How far down the document each chart is drawn, in order.
std::vector<double> ChartOffsets(const std::string& svg) {
  static const std::regex kGroup(R"re(<g class="chart" transform="translate\(0 ([0-9.]+)\)">)re");
  std::vector<double> offsets;
  for (std::sregex_iterator it(svg.begin(), svg.end(), kGroup), end; it != end; ++it) {
    offsets.push_back(std::stod((*it)[1]));
  }
  return offsets;
}

// Eight steps: two of warm start, six sampled; held-out rounds at 4 and 6.
v1::TrainerState EightSteps() {
  v1::TrainerState state;
  state.set_step(8);
  for (double loss : {6.0, 2.0, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3}) state.add_loss_history(loss);
  for (double r : {0.0, 0.0, 0.1, 0.3, 0.2, 0.4, 0.3, 0.5}) state.add_reward_history(r);
  for (int i = 0; i < 8; ++i) {
    v1::StagePassRates* rates = state.add_pass_rate_history();
    if (i < 2) continue;  // the warm start samples nothing
    rates->set_static_pass(1.0);
    rates->set_compile_pass(0.75);
    rates->set_tiny_run_pass(0.5);
    rates->set_multi_input_pass(0.25 + 0.05 * i);
    rates->set_correct(0.125 * (i - 1));
    state.add_correct_rate_history(rates->correct());
  }
  for (int step : {6, 4}) {
    v1::HeldOutPoint* point = state.add_heldout_history();
    point->set_step(step);
    point->mutable_overall()->set_tasks(1);
    point->mutable_overall()->set_correct_rate(step / 8.0);
    point->mutable_overall()->set_compile_rate(1.0);
  }
  return state;
}

TEST(TrainingCurvesTest, ThreeChartsOnOneStepAxisWarmStartLossRewardAndEveryStage) {
  const std::string svg =
      TrainingCurvesSvg(EightSteps(), {.title = "job-1 <demo>", .supervised_steps = 2});
  ASSERT_TRUE(WellFormed(svg));
  EXPECT_THAT(svg, HasSubstr("job-1 &lt;demo&gt;: warm-start loss"));
  const std::vector<Rect> areas = PlotAreas(svg);
  ASSERT_EQ(areas.size(), 3u);  // loss, reward, rates, top to bottom
  const std::vector<double> offsets = ChartOffsets(svg);
  ASSERT_EQ(offsets.size(), 3u);
  EXPECT_EQ(offsets[0], 0);
  EXPECT_GT(offsets[1], offsets[0] + areas[0].height);
  EXPECT_GT(offsets[2], offsets[1] + areas[1].height);
  EXPECT_THAT(LegendNames(svg),
              ElementsAre("warm-start loss", "mean reward per step", "moving average of 10 steps",
                          "static", "compile", "tiny run", "multi-input", "correct",
                          "held-out correct", "held-out compile"));

  // The loss of the two warm-start steps only: GRPO's loss is another quantity.
  const std::vector<ChartPoint> loss = SeriesPixels(svg, "warm-start loss");
  EXPECT_THAT(Steps(loss, areas[0], 8), ElementsAre(1, 2));
  // Rewards as dots at the sampled steps; the warm start is shaded instead.
  const std::vector<ChartPoint> dots = PointPixels(svg, "mean reward per step");
  EXPECT_THAT(Steps(dots, areas[1], 8), ElementsAre(3, 4, 5, 6, 7, 8));
  EXPECT_THAT(SeriesPixels(svg, "mean reward per step"), ::testing::IsEmpty()) << "no line";
  EXPECT_THAT(svg, HasSubstr("warm start: no samples"));

  // Every stage at every sampled step, in [0, 1].
  for (const char* stage : {"static", "compile", "tiny run", "multi-input", "correct"}) {
    EXPECT_THAT(Steps(SeriesPixels(svg, stage), areas[2], 8), ElementsAre(3, 4, 5, 6, 7, 8))
        << stage;
  }
  const std::vector<ChartPoint> correct = SeriesPixels(svg, "correct");
  EXPECT_NEAR(DataY(areas[2], correct[0].y, 0, 1), 0.125, 1e-3);
  EXPECT_NEAR(DataY(areas[2], correct[5].y, 0, 1), 0.75, 1e-3);
  EXPECT_NEAR(DataY(areas[2], SeriesPixels(svg, "compile")[0].y, 0, 1), 0.75, 1e-3);
  const std::vector<ChartPoint> heldout = SeriesPixels(svg, "held-out correct");
  EXPECT_THAT(Steps(heldout, areas[2], 8), ElementsAre(4, 6));  // in step order
  EXPECT_NEAR(DataY(areas[2], heldout[0].y, 0, 1), 0.5, 1e-3);
  EXPECT_THAT(svg, Not(HasSubstr("no-data")));
}

TEST(TrainingCurvesTest, TheSmoothedRewardIsATrailingMovingAverageOfTheStatedWindow) {
  v1::TrainerState state;
  state.set_step(5);
  for (double r : {0.0, 1.0, 0.0, 1.0, 0.0}) state.add_reward_history(r);
  const std::string svg = TrainingCurvesSvg(state, {.title = "t", .smoothing_window = 2});
  const std::vector<Rect> areas = PlotAreas(svg);
  ASSERT_EQ(areas.size(), 2u);  // no warm start: no loss chart
  const std::vector<ChartPoint> line = SeriesPixels(svg, "moving average of 2 steps");
  ASSERT_EQ(line.size(), 5u);
  // y spans the data, 0..1: the first point is itself, the rest halves.
  EXPECT_NEAR(DataY(areas[0], line[0].y, 0, 1), 0.0, 1e-3);
  for (size_t i = 1; i < line.size(); ++i) {
    EXPECT_NEAR(DataY(areas[0], line[i].y, 0, 1), 0.5, 1e-3) << i;
  }
}

TEST(TrainingCurvesTest, NoHeldOutLegendWithoutARoundAndOldCheckpointsKeepTheirCorrectRate) {
  // A checkpoint from before the per-stage history: only correct_rate_history.
  v1::TrainerState state;
  state.set_step(3);
  for (double r : {0.1, 0.2, 0.3}) state.add_reward_history(r);
  for (double c : {0.25, 0.5}) state.add_correct_rate_history(c);
  const std::string svg = TrainingCurvesSvg(state, {.title = "old"});
  ASSERT_TRUE(WellFormed(svg));
  EXPECT_THAT(LegendNames(svg),
              ElementsAre("mean reward per step", "moving average of 10 steps", "correct"));
  EXPECT_THAT(svg, Not(HasSubstr("held-out")));
  const Rect rates = PlotAreas(svg).at(1);
  EXPECT_THAT(Steps(SeriesPixels(svg, "correct"), rates, 3), ElementsAre(2, 3));
}

TEST(TrainingCurvesTest, AJobStillInItsWarmStartGivesValidChartsWithNotes) {
  v1::TrainerState state;
  state.set_step(2);
  for (double loss : {6.5, 4.0}) state.add_loss_history(loss);
  state.add_reward_history(0);
  state.add_reward_history(0);
  const std::string svg = TrainingCurvesSvg(state, {.title = "warm", .supervised_steps = 5});
  ASSERT_TRUE(WellFormed(svg));
  EXPECT_THAT(LegendNames(svg), ElementsAre("warm-start loss"));
  EXPECT_THAT(svg, HasSubstr("no sampled step yet"));
  EXPECT_THAT(svg, HasSubstr("no sampled step or held-out round yet"));
  // The axis already spans the whole warm start.
  const Rect loss = PlotAreas(svg).at(0);
  EXPECT_THAT(Steps(SeriesPixels(svg, "warm-start loss"), loss, 5), ElementsAre(1, 2));
  EXPECT_TRUE(WellFormed(TrainingCurvesSvg(v1::TrainerState(), {})));
}

TEST(TrainingCurvesTest, StageTimesGetAChartOfTheirOwnPerStep) {
  v1::TrainerState state;
  state.set_step(3);
  for (double r : {0.1, 0.2, 0.3}) state.add_reward_history(r);
  for (int i = 0; i < 3; ++i) {
    v1::StepTimes* t = state.add_step_times_history();
    t->set_step_seconds(10 + i);
    t->set_rollout_seconds(8);
    t->set_verify_seconds(6);
    t->set_train_seconds(3 + i);
    t->set_weight_sync_seconds(0.5);
    t->set_learner_wait_seconds(1);
  }
  const std::string svg = TrainingCurvesSvg(state, {.title = "timed"});
  ASSERT_TRUE(WellFormed(svg));
  const std::vector<Rect> areas = PlotAreas(svg);
  ASSERT_EQ(areas.size(), 3u);  // reward, rates, stage times
  EXPECT_THAT(svg, HasSubstr("where each step&apos;s time went"));
  for (const char* stage : {"step", "rollout", "verify", "train", "weight sync", "learner wait"}) {
    EXPECT_THAT(Steps(SeriesPixels(svg, stage), areas[2], 3), ElementsAre(1, 2, 3)) << stage;
  }
  // Longer is higher up: the step above rollout above training above the wait.
  const double step_y = SeriesPixels(svg, "step")[0].y;
  const double rollout_y = SeriesPixels(svg, "rollout")[0].y;
  const double train_y = SeriesPixels(svg, "train")[0].y;
  const double wait_y = SeriesPixels(svg, "learner wait")[0].y;
  EXPECT_LT(step_y, rollout_y);
  EXPECT_LT(rollout_y, train_y);
  EXPECT_LT(train_y, wait_y);
}

// A multi-turn job: a chart of the share of trajectories solved by each
// turn, one line per turn, sampled steps only (the warm start's points are
// left out), below the pass rates.
TEST(TrainingCurvesTest, AMultiTurnJobGetsTheShareSolvedByEachTurnPerStep) {
  v1::TrainerState state;
  state.set_step(4);
  for (double r : {0.0, 0.1, 0.3, 0.4}) state.add_reward_history(r);
  const std::vector<std::vector<double>> solved = {{0, 0, 0}, {0.25, 0.5, 0.5},
                                                   {0.25, 0.5, 0.75}, {0.5, 0.75, 1.0}};
  for (const std::vector<double>& by_turn : solved) {
    v1::TurnPoint* point = state.add_turn_history();
    for (double v : by_turn) point->add_solved_by_turn(v);
  }
  const std::string svg = TrainingCurvesSvg(state, {.title = "turns", .supervised_steps = 1});
  ASSERT_TRUE(WellFormed(svg));
  const std::vector<Rect> areas = PlotAreas(svg);
  ASSERT_EQ(areas.size(), 4u);  // loss, reward, rates, turns
  EXPECT_THAT(svg, HasSubstr("trajectories solved by each turn"));
  for (int k = 0; k < 3; ++k) {
    const std::string name = "solved by turn " + std::to_string(k + 1);
    const std::vector<ChartPoint> pixels = SeriesPixels(svg, name);
    EXPECT_THAT(Steps(pixels, areas[3], 4), ElementsAre(2, 3, 4)) << name;
    ASSERT_EQ(pixels.size(), 3u);
    for (size_t i = 0; i < pixels.size(); ++i) {
      EXPECT_NEAR(DataY(areas[3], pixels[i].y, 0, 1), solved[i + 1][k], 0.01) << name << " " << i;
    }
  }
  EXPECT_THAT(TrainingCurvesSvg(EightSteps(), {}), Not(HasSubstr("solved by each turn")));
}

TEST(TrainingCurvesTest, NoStageTimesChartForAStateWithoutTimes) {
  v1::TrainerState state;
  state.set_step(2);
  for (double r : {0.1, 0.2}) state.add_reward_history(r);
  const std::string svg = TrainingCurvesSvg(state, {.title = "untimed"});
  EXPECT_EQ(PlotAreas(svg).size(), 2u);
  EXPECT_THAT(svg, Not(HasSubstr("time went")));
}

}  // namespace
}  // namespace kforge
