// Charts a person opens in a browser: self-contained SVG (no scripts, no
// external fonts or styles), and the charts of an evaluation report, which
// `kforge eval` writes beside report.json (a job's training curves are
// eval/training_curves.h).
//
//   WriteFileAtomically(dir + "/fast_p.svg", FastPSvg(report));
//
//   LineChart chart{.title = "reward", .x_label = "step", .y_label = "mean reward"};
//   chart.series.push_back({.name = "run a", .colour = "#1f77b4", .points = {{1, 0.2}, {2, 0.5}}});
//   std::string svg = LineChartSvg(chart);
//
// Every element a reader (or a test) looks for carries a class: the plot
// frame is <rect class="plot-area">, each series a <polyline class="series"
// data-series="NAME" points="x,y ...">, each dot <circle class="point"
// data-series="NAME">, each legend entry <text class="legend">, the
// empty-chart note <text class="no-data">. Text is
// XML-escaped. No LibTorch, no gRPC: the CLI and the learner share it.
#ifndef KFORGE_EVAL_EVAL_PLOTS_H_
#define KFORGE_EVAL_EVAL_PLOTS_H_

#include <optional>
#include <string>
#include <vector>

#include "kforge/v1/eval.pb.h"

namespace kforge {

struct ChartPoint {
  double x = 0;
  double y = 0;
};

struct ChartSeries {
  std::string name;    // the legend entry
  std::string colour;  // any SVG colour
  // Joined in this order; points with a non-finite coordinate are skipped.
  std::vector<ChartPoint> points;
  // A dot on every point, for sparse series (pass@k, held-out rounds). A
  // series of one point always gets its dot: a line of one point is invisible.
  bool markers = false;
  // Joined by a line; off, the points stand alone (markers then always):
  // noisy per-step figures under a smoothed line.
  bool line = true;
};

// A shaded span of the x axis with a label (the warm start of a job).
struct ChartBand {
  double from = 0;
  double to = 0;
  std::string label;
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<ChartSeries> series;
  // Rates and shares: y fixed to [0, 1]. Otherwise the data's range,
  // widened to round tick values.
  bool unit_y = false;
  // Ticks only at whole numbers (k, steps).
  bool integer_x = false;
  // The x axis span; without it, exactly the data's (first and last points
  // at the axis ends).
  std::optional<std::pair<double, double>> x_range;
  std::optional<ChartBand> band;
  // Shown in the frame when no series has a point.
  std::string empty_note = "no data";
};

// The chart as a complete SVG document.
std::string LineChartSvg(const LineChart& chart);

// Several charts stacked top to bottom in one SVG document (a job's curves).
std::string StackedChartsSvg(const std::vector<LineChart>& charts);

// A histogram of each solved task's best speedup over eager, as SVG.
std::string SpeedupHistogramSvg(const v1::EvalReport& report);

// pass@k against k: one series per level ("level N") and "overall".
LineChart PassAtKChart(const v1::EvalReport& report);
std::string PassAtKSvg(const v1::EvalReport& report);

// KernelBench's fast_p as a curve: the share of tasks with a correct kernel
// faster than eager PyTorch by more than a factor p, for p from 0 to a bit
// beyond the largest best speedup (and at least past p = 1). At p = 0 it is
// the share of tasks solved at all (timed or not, as LevelEval.fast_p "0");
// it steps down at each task's best speedup. One series per level and
// "overall", computed from report.task_results.
LineChart FastPChart(const v1::EvalReport& report);
std::string FastPSvg(const v1::EvalReport& report);

}  // namespace kforge

#endif  // KFORGE_EVAL_EVAL_PLOTS_H_
