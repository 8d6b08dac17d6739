#include "eval/training_curves.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kforge {
namespace {

// `history` as (step, value) points, its newest entry at `last_step`; only
// steps in (after, until].
template <typename History, typename Value>
std::vector<ChartPoint> StepPoints(const History& history, int64_t last_step, int64_t after,
                                   int64_t until, Value value) {
  std::vector<ChartPoint> points;
  const int64_t first = last_step - history.size() + 1;
  for (int i = 0; i < history.size(); ++i) {
    const int64_t step = first + i;
    if (step > after && step <= until && step >= 1) {
      points.push_back({static_cast<double>(step), value(history[i])});
    }
  }
  return points;
}

std::vector<ChartPoint> StepPoints(const google::protobuf::RepeatedField<double>& history,
                                   int64_t last_step, int64_t after) {
  return StepPoints(history, last_step, after, last_step, [](double v) { return v; });
}

// A trailing moving average over `window` points (fewer at the start).
std::vector<ChartPoint> MovingAverage(const std::vector<ChartPoint>& points, int window) {
  std::vector<ChartPoint> out;
  double sum = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    sum += points[i].y;
    if (i >= static_cast<size_t>(window)) sum -= points[i - window].y;
    const size_t n = std::min(i + 1, static_cast<size_t>(std::max(1, window)));
    out.push_back({points[i].x, sum / static_cast<double>(n)});
  }
  return out;
}

// The funnel's stages in order, as StagePassRates holds them.
struct StageColumn {
  const char* name;
  double (v1::StagePassRates::*rate)() const;
  const char* colour;
};
constexpr StageColumn kStageColumns[] = {
    {"static", &v1::StagePassRates::static_pass, "#9467bd"},
    {"compile", &v1::StagePassRates::compile_pass, "#1f77b4"},
    {"tiny run", &v1::StagePassRates::tiny_run_pass, "#17becf"},
    {"multi-input", &v1::StagePassRates::multi_input_pass, "#ff7f0e"},
    {"correct", &v1::StagePassRates::correct, "#2ca02c"},
};

// The pass rate of every stage per sampled step; a checkpoint from before
// pass_rate_history existed gives only "correct" (correct_rate_history).
void AddStageSeries(const v1::TrainerState& state, int64_t sampled_after, LineChart* chart) {
  for (const StageColumn& column : kStageColumns) {
    ChartSeries series{.name = column.name, .colour = column.colour};
    series.points = StepPoints(state.pass_rate_history(), state.step(), sampled_after,
                               state.step(), [&](const v1::StagePassRates& rates) {
                                 return (rates.*column.rate)();
                               });
    if (series.points.empty() && column.rate == &v1::StagePassRates::correct) {
      series.points = StepPoints(state.correct_rate_history(), state.step(), sampled_after);
    }
    if (!series.points.empty()) chart->series.push_back(std::move(series));
  }
}

// What every chart of a job shares: one x axis (so a step lines up across
// them) and the shaded warm start.
struct Frame {
  std::pair<double, double> x_range;
  std::optional<ChartBand> band;
};

LineChart LossChart(const v1::TrainerState& state, const TrainingCurvesOptions& options,
                    const Frame& frame) {
  LineChart chart{.title = absl::StrCat(options.title, ": warm-start loss"),
                  .x_label = "optimiser step", .y_label = "supervised loss",
                  .integer_x = true, .x_range = frame.x_range,
                  .empty_note = "no warm-start step yet"};
  std::vector<ChartPoint> loss = StepPoints(state.loss_history(), state.step(), 0,
                                            options.supervised_steps, [](double v) { return v; });
  if (!loss.empty()) {
    chart.series.push_back({.name = "warm-start loss", .colour = "#d62728", .points = loss});
  }
  return chart;
}

LineChart RewardChart(const v1::TrainerState& state, const TrainingCurvesOptions& options,
                      const Frame& frame, std::string title) {
  LineChart chart{.title = std::move(title), .x_label = "optimiser step",
                  .y_label = "mean reward", .integer_x = true, .x_range = frame.x_range,
                  .band = frame.band, .empty_note = "no sampled step yet"};
  std::vector<ChartPoint> rewards =
      StepPoints(state.reward_history(), state.step(), options.supervised_steps);
  if (rewards.empty()) return chart;
  const int window = std::max(1, options.smoothing_window);
  std::vector<ChartPoint> smoothed = MovingAverage(rewards, window);
  // The points first, so the smoothed line is drawn over them.
  chart.series.push_back({.name = "mean reward per step", .colour = "#9ecae1",
                          .points = std::move(rewards), .line = false});
  chart.series.push_back({.name = absl::StrCat("moving average of ", window, " steps"),
                          .colour = "#1f77b4", .points = std::move(smoothed)});
  return chart;
}

LineChart RatesChart(const v1::TrainerState& state, const TrainingCurvesOptions& options,
                     const Frame& frame, const std::vector<v1::HeldOutPoint>& heldout) {
  LineChart chart{.title = "pass rate of each funnel stage", .x_label = "optimiser step",
                  .y_label = "share of the step's samples", .unit_y = true, .integer_x = true,
                  .x_range = frame.x_range, .band = frame.band,
                  .empty_note = "no sampled step or held-out round yet"};
  AddStageSeries(state, options.supervised_steps, &chart);
  // Held-out rates only where a round ran: a legend entry without data
  // would promise a figure the job never measured.
  if (heldout.empty()) return chart;
  ChartSeries correct{.name = "held-out correct", .colour = "#d62728", .markers = true};
  ChartSeries compiled{.name = "held-out compile", .colour = "#8c564b", .markers = true};
  for (const v1::HeldOutPoint& p : heldout) {
    correct.points.push_back({static_cast<double>(p.step()), p.overall().correct_rate()});
    compiled.points.push_back({static_cast<double>(p.step()), p.overall().compile_rate()});
  }
  chart.series.push_back(std::move(correct));
  chart.series.push_back(std::move(compiled));
  return chart;
}

// The stages of StepTimes the stage-times chart draws, step first (the
// cadence the others are held against).
struct TimeColumn {
  const char* name;
  double (v1::StepTimes::*seconds)() const;
  const char* colour;
};
constexpr TimeColumn kTimeColumns[] = {
    {"step", &v1::StepTimes::step_seconds, "#000000"},
    {"rollout", &v1::StepTimes::rollout_seconds, "#1f77b4"},
    {"verify", &v1::StepTimes::verify_seconds, "#ff7f0e"},
    {"train", &v1::StepTimes::train_seconds, "#2ca02c"},
    {"weight sync", &v1::StepTimes::weight_sync_seconds, "#9467bd"},
    {"learner wait", &v1::StepTimes::learner_wait_seconds, "#d62728"},
};

LineChart StageTimesChart(const v1::TrainerState& state, const Frame& frame) {
  LineChart chart{.title = "where each step's time went", .x_label = "optimiser step",
                  .y_label = "seconds", .integer_x = true, .x_range = frame.x_range,
                  .band = frame.band};
  for (const TimeColumn& column : kTimeColumns) {
    ChartSeries series{.name = column.name, .colour = column.colour};
    series.points = StepPoints(state.step_times_history(), state.step(), 0, state.step(),
                               [&](const v1::StepTimes& t) { return (t.*column.seconds)(); });
    chart.series.push_back(std::move(series));
  }
  return chart;
}

// A colour per turn (turn 0 first), enough for MultiTurnSpec's 8.
constexpr const char* kTurnColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                        "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

// Multi-turn jobs: per sampled step, the share of trajectories solved by
// each turn ("solved by turn k", non-decreasing in k: the gap between two
// lines is what a round of feedback added).
LineChart TurnsChart(const v1::TrainerState& state, const TrainingCurvesOptions& options,
                     const Frame& frame) {
  LineChart chart{.title = "trajectories solved by each turn", .x_label = "optimiser step",
                  .y_label = "share of the step's trajectories", .unit_y = true,
                  .integer_x = true, .x_range = frame.x_range, .band = frame.band,
                  .empty_note = "no sampled multi-turn step yet"};
  int turns = 0;
  for (const v1::TurnPoint& p : state.turn_history()) turns = std::max(turns, p.solved_by_turn_size());
  for (int k = 0; k < turns && k < static_cast<int>(std::size(kTurnColours)); ++k) {
    ChartSeries series{.name = absl::StrCat("solved by turn ", k + 1), .colour = kTurnColours[k]};
    series.points = StepPoints(state.turn_history(), state.step(), options.supervised_steps,
                               state.step(), [k](const v1::TurnPoint& p) {
                                 return k < p.solved_by_turn_size() ? p.solved_by_turn(k) : 0.0;
                               });
    if (!series.points.empty()) chart.series.push_back(std::move(series));
  }
  return chart;
}

}  // namespace

std::string TrainingCurvesSvg(const v1::TrainerState& state, const TrainingCurvesOptions& options) {
  std::vector<v1::HeldOutPoint> heldout(state.heldout_history().begin(),
                                        state.heldout_history().end());
  std::stable_sort(heldout.begin(), heldout.end(),
                   [](const v1::HeldOutPoint& a, const v1::HeldOutPoint& b) {
                     return a.step() < b.step();
                   });
  int64_t last = std::max(state.step(), options.supervised_steps);
  for (const v1::HeldOutPoint& p : heldout) last = std::max(last, p.step());
  Frame frame{.x_range = {0, static_cast<double>(std::max<int64_t>(1, last))}};
  if (options.supervised_steps > 0) {
    frame.band = ChartBand{.from = 0, .to = static_cast<double>(options.supervised_steps),
                           .label = "warm start: no samples"};
  }
  std::vector<LineChart> charts;
  if (options.supervised_steps > 0) charts.push_back(LossChart(state, options, frame));
  charts.push_back(RewardChart(state, options, frame,
                               charts.empty() ? options.title : "mean reward"));
  charts.push_back(RatesChart(state, options, frame, heldout));
  // Only for a multi-turn job: a single-turn one has no turns to show.
  if (!state.turn_history().empty()) charts.push_back(TurnsChart(state, options, frame));
  // Only for a job that recorded times: a checkpoint from before they
  // existed gets no empty chart.
  if (!state.step_times_history().empty()) charts.push_back(StageTimesChart(state, frame));
  return StackedChartsSvg(charts);
}

}  // namespace kforge
