#include "eval/eval_plots.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kforge {
namespace {

// One chart's canvas; the plot frame inside it leaves room for the title
// above, tick labels and the x label below, the y label left and the legend
// right.
constexpr int kWidth = 760;
constexpr int kChartHeight = 380;
constexpr double kLeft = 70, kTop = 40, kRight = 240, kBottom = 60;
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c",
                                    "#d62728", "#9467bd", "#8c564b"};
constexpr const char* kOverallColour = "#222222";
// fast_p runs this far past the largest speedup, so the last step down is
// visible rather than on the frame.
constexpr double kFastPHeadroom = 1.1;

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string SvgOpen(int width, int height) {
  // The white background keeps the lines readable in dark-mode viewers.
  return absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
      width, height, width, height, width, height);
}

bool Finite(const ChartPoint& p) { return std::isfinite(p.x) && std::isfinite(p.y); }

// A round tick spacing (1, 2 or 5 times a power of ten) giving about
// `target` intervals over `span`.
double NiceStep(double span, int target) {
  if (!(span > 0) || !std::isfinite(span)) return 1;
  const double raw = span / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / magnitude;
  return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * magnitude;
}

struct Axis {
  double lo = 0;
  double hi = 1;
  double step = 0.2;  // between ticks
};

// Where data lands on the canvas: x to the right, y upwards from the frame's
// bottom edge.
struct Frame {
  Axis x, y;
  double left = kLeft, top = kTop;
  double width = kWidth - kLeft - kRight, height = kChartHeight - kTop - kBottom;

  double Px(double v) const { return left + (v - x.lo) / (x.hi - x.lo) * width; }
  double Py(double v) const { return top + height - (v - y.lo) / (y.hi - y.lo) * height; }
};

// The axes for `chart`; `empty` tells whether any series has a point.
Frame LayOut(const LineChart& chart, bool* empty) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double x_lo = kInf, x_hi = -kInf, y_lo = kInf, y_hi = -kInf;
  for (const ChartSeries& s : chart.series) {
    for (const ChartPoint& p : s.points) {
      if (!Finite(p)) continue;
      x_lo = std::min(x_lo, p.x), x_hi = std::max(x_hi, p.x);
      y_lo = std::min(y_lo, p.y), y_hi = std::max(y_hi, p.y);
    }
  }
  *empty = x_lo > x_hi;
  Frame f;
  f.x = chart.x_range ? Axis{chart.x_range->first, chart.x_range->second}
        : *empty      ? Axis{0, 1}
                      : Axis{x_lo, x_hi};
  if (!(f.x.hi > f.x.lo)) f.x = {f.x.lo - 1, f.x.lo + 1};  // one x value: centred
  f.x.step = NiceStep(f.x.hi - f.x.lo, 6);
  if (chart.integer_x) f.x.step = std::max(1.0, f.x.step);
  if (chart.unit_y) {
    f.y = {0, 1, 0.2};
    return f;
  }
  f.y = *empty ? Axis{0, 1} : Axis{y_lo, y_hi};
  if (f.y.hi - f.y.lo < 1e-12) {
    const double pad = std::max(0.5, 0.1 * std::abs(f.y.lo));
    f.y = {f.y.lo - pad, f.y.hi + pad};
  }
  // Widened to whole ticks, so the frame's edges carry labels.
  f.y.step = NiceStep(f.y.hi - f.y.lo, 5);
  f.y.lo = std::floor(f.y.lo / f.y.step + 1e-9) * f.y.step;
  f.y.hi = std::ceil(f.y.hi / f.y.step - 1e-9) * f.y.step;
  return f;
}

// Tick values of `axis`: the multiples of its step inside it.
std::vector<double> Ticks(const Axis& axis) {
  std::vector<double> ticks;
  const double first = std::ceil(axis.lo / axis.step - 1e-9);
  const double last = std::floor(axis.hi / axis.step + 1e-9);
  for (double i = first; i <= last && ticks.size() < 50; ++i) ticks.push_back(i * axis.step);
  return ticks;
}

std::string TickLabel(double value, double step) {
  // Snapped to the step so 0.1 * 3 prints as 0.3, and -0 as 0.
  const double snapped = std::round(value / step) * step;
  return absl::StrFormat("%g", std::abs(snapped) < step * 1e-9 ? 0.0 : snapped);
}

void AppendFrame(const LineChart& chart, const Frame& f, std::string* svg) {
  absl::StrAppendFormat(svg, "<text class=\"title\" x=\"%.1f\" y=\"24\" font-size=\"15\" "
                        "font-weight=\"bold\">%s</text>\n", f.left, Escape(chart.title));
  if (chart.band && chart.band->to > f.x.lo && chart.band->from < f.x.hi) {
    const double from = f.Px(std::max(chart.band->from, f.x.lo));
    const double to = f.Px(std::min(chart.band->to, f.x.hi));
    absl::StrAppendFormat(svg, "<rect class=\"band\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                          "height=\"%.1f\" fill=\"#ececec\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
                          "fill=\"#666666\" font-size=\"11\">%s</text>\n",
                          from, f.top, to - from, f.height, from + 4, f.top + 14,
                          Escape(chart.band->label));
  }
  for (double t : Ticks(f.y)) {
    absl::StrAppendFormat(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                          "stroke=\"#dddddd\"/>\n<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" "
                          "text-anchor=\"end\">%s</text>\n",
                          f.left, f.Py(t), f.left + f.width, f.Py(t), f.left - 6, f.Py(t) + 4,
                          TickLabel(t, f.y.step));
  }
  const double bottom = f.top + f.height;
  for (double t : Ticks(f.x)) {
    absl::StrAppendFormat(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                          "stroke=\"#444444\"/>\n<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" "
                          "text-anchor=\"middle\">%s</text>\n",
                          f.Px(t), bottom, f.Px(t), bottom + 5, f.Px(t), bottom + 18,
                          TickLabel(t, f.x.step));
  }
  absl::StrAppendFormat(svg, "<rect class=\"plot-area\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                        "height=\"%.1f\" fill=\"none\" stroke=\"#444444\"/>\n",
                        f.left, f.top, f.width, f.height);
  absl::StrAppendFormat(svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                        f.left + f.width / 2, bottom + 40, Escape(chart.x_label));
  absl::StrAppendFormat(svg, "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" "
                        "transform=\"rotate(-90 18 %.1f)\">%s</text>\n",
                        f.top + f.height / 2, f.top + f.height / 2, Escape(chart.y_label));
}

void AppendSeries(const LineChart& chart, const Frame& f, std::string* svg) {
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const ChartSeries& s = chart.series[i];
    std::vector<ChartPoint> points;
    for (const ChartPoint& p : s.points) {
      if (Finite(p)) points.push_back(p);
    }
    const std::string colour = Escape(s.colour);
    if (!points.empty() && s.line) {
      std::string coords;
      for (const ChartPoint& p : points) {
        absl::StrAppendFormat(&coords, "%s%.1f,%.1f", coords.empty() ? "" : " ", f.Px(p.x),
                              f.Py(p.y));
      }
      absl::StrAppendFormat(svg, "<polyline class=\"series\" data-series=\"%s\" points=\"%s\" "
                            "fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                            Escape(s.name), coords, colour);
    }
    if (s.markers || !s.line || points.size() == 1) {
      // Points alone are smaller: there are many of them.
      const double radius = s.line ? 3.5 : 2.5;
      for (const ChartPoint& p : points) {
        absl::StrAppendFormat(svg, "<circle class=\"point\" data-series=\"%s\" cx=\"%.1f\" "
                              "cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"/>\n",
                              Escape(s.name), f.Px(p.x), f.Py(p.y), radius, colour);
      }
    }
    // Every series is named, also an empty one: the reader sees what is missing.
    const double x = f.left + f.width + 14, y = f.top + 10 + 20.0 * static_cast<double>(i);
    if (s.line) {
      absl::StrAppendFormat(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                            "stroke=\"%s\" stroke-width=\"3\"/>\n", x, y, x + 22, y, colour);
    } else {
      absl::StrAppendFormat(svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                            x + 11, y, colour);
    }
    absl::StrAppendFormat(svg, "<text class=\"legend\" x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          x + 28, y + 4, Escape(s.name));
  }
}

// One chart drawn `offset` pixels down the document.
std::string ChartGroup(const LineChart& chart, int offset) {
  bool empty = false;
  const Frame f = LayOut(chart, &empty);
  std::string svg = absl::StrFormat("<g class=\"chart\" transform=\"translate(0 %d)\">\n", offset);
  AppendFrame(chart, f, &svg);
  AppendSeries(chart, f, &svg);
  if (empty) {
    absl::StrAppendFormat(&svg, "<text class=\"no-data\" x=\"%.1f\" y=\"%.1f\" "
                          "text-anchor=\"middle\" fill=\"#888888\">%s</text>\n",
                          f.left + f.width / 2, f.top + f.height / 2, Escape(chart.empty_note));
  }
  absl::StrAppend(&svg, "</g>\n");
  return svg;
}

std::string LevelName(int level) { return absl::StrCat("level ", level); }

const char* LevelColour(size_t index) { return kPalette[index % std::size(kPalette)]; }

ChartSeries PassAtKSeries(const v1::LevelEval& level, std::string name, std::string colour) {
  const std::map<int, double> by_k(level.pass_at_k().begin(), level.pass_at_k().end());
  ChartSeries series{.name = std::move(name), .colour = std::move(colour), .markers = true};
  for (const auto& [k, value] : by_k) series.points.push_back({static_cast<double>(k), value});
  return series;
}

// The fast_p step curve of `tasks` from p = 0 to `p_max` (see FastPChart).
std::vector<ChartPoint> FastPCurve(const std::vector<const v1::TaskEval*>& tasks, double p_max) {
  if (tasks.empty()) return {};
  const double n = static_cast<double>(tasks.size());
  int solved = 0;
  std::vector<double> speedups;  // of solved, timed tasks
  for (const v1::TaskEval* t : tasks) {
    if (t->correct() == 0) continue;
    ++solved;
    if (t->best_speedup_vs_eager() > 0) speedups.push_back(t->best_speedup_vs_eager());
  }
  std::sort(speedups.begin(), speedups.end());
  std::vector<ChartPoint> points = {{0, solved / n}};
  // Solved, but no task timed (the baseline never ran): beyond p = 0 there is
  // no figure, and a line along 0 would claim one.
  if (solved > 0 && speedups.empty()) return points;
  // Solved but never timed: counted at p = 0 only, faster than nothing.
  if (speedups.size() != static_cast<size_t>(solved)) points.push_back({0, speedups.size() / n});
  for (size_t i = 0; i < speedups.size();) {
    size_t j = i;
    while (j < speedups.size() && speedups[j] == speedups[i]) ++j;
    // "Faster by more than p": a task of speedup s no longer counts at p = s.
    points.push_back({speedups[i], (speedups.size() - i) / n});
    points.push_back({speedups[i], (speedups.size() - j) / n});
    i = j;
  }
  points.push_back({p_max, 0});
  return points;
}

}  // namespace

std::string LineChartSvg(const LineChart& chart) {
  return SvgOpen(kWidth, kChartHeight) + ChartGroup(chart, 0) + "</svg>\n";
}

std::string SpeedupHistogramSvg(const v1::EvalReport& report) {
  const std::vector<double> edges = {0, 0.5, 0.8, 1.0, 1.25, 1.5, 2.0, 4.0};
  std::vector<int> counts(edges.size(), 0);
  for (const v1::TaskEval& t : report.task_results()) {
    if (t.best_speedup_vs_eager() <= 0) continue;
    size_t bin = 0;
    while (bin + 1 < edges.size() && t.best_speedup_vs_eager() >= edges[bin + 1]) ++bin;
    ++counts[bin];
  }
  if (report.overall().timed_tasks() == 0) {
    // No baseline ran: zero-height bars would read as measured.
    return absl::StrFormat(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"60\" "
        "font-family=\"sans-serif\" font-size=\"12\">\n<text class=\"no-data\" x=\"10\" "
        "y=\"30\">No correct candidate was timed against eager PyTorch: speedups not "
        "measured</text>\n</svg>\n",
        kWidth);
  }
  const int most = std::max(1, *std::max_element(counts.begin(), counts.end()));
  const int bar = 70, height = 200, left = 40, top = 30;
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<text x=\"%d\" y=\"18\">Best correct speedup vs eager PyTorch, tasks per bin (%d timed)"
      "</text>\n",
      left + bar * static_cast<int>(edges.size()) + 20, height + top + 50, left,
      report.overall().timed_tasks());
  for (size_t i = 0; i < edges.size(); ++i) {
    const int h = counts[i] * height / most;
    const int x = left + static_cast<int>(i) * bar;
    const std::string label = i + 1 < edges.size()
                                  ? absl::StrFormat("%gx-%gx", edges[i], edges[i + 1])
                                  : absl::StrFormat(">=%gx", edges[i]);
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n"
                          "<text x=\"%d\" y=\"%d\">%d</text>\n"
                          "<text x=\"%d\" y=\"%d\">%s</text>\n",
                          x + 5, top + height - h, bar - 10, h,
                          edges[i] >= 1.0 ? "#2a9d8f" : "#e76f51", x + 25, top + height - h - 4,
                          counts[i], x + 5, top + height + 18, Escape(label));
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

LineChart PassAtKChart(const v1::EvalReport& report) {
  LineChart chart{.title = absl::StrCat("pass@k over ", report.overall().tasks(), " tasks"),
                  .x_label = "k (samples drawn per task)",
                  .y_label = "pass@k",
                  .unit_y = true,
                  .integer_x = true};
  for (int i = 0; i < report.levels_size(); ++i) {
    const v1::LevelEval& level = report.levels(i);
    chart.series.push_back(PassAtKSeries(level, LevelName(level.level()), LevelColour(i)));
  }
  chart.series.push_back(PassAtKSeries(report.overall(), "overall", kOverallColour));
  return chart;
}

std::string PassAtKSvg(const v1::EvalReport& report) { return LineChartSvg(PassAtKChart(report)); }

LineChart FastPChart(const v1::EvalReport& report) {
  std::map<int, std::vector<const v1::TaskEval*>> by_level;
  std::vector<const v1::TaskEval*> all;
  double largest = 0;
  for (const v1::TaskEval& t : report.task_results()) {
    by_level[t.level()].push_back(&t);
    all.push_back(&t);
    if (t.correct() > 0 && std::isfinite(t.best_speedup_vs_eager())) {
      largest = std::max(largest, t.best_speedup_vs_eager());
    }
  }
  // Always past p = 1, where "faster than eager" begins.
  const double p_max = kFastPHeadroom * std::max(1.0, largest);
  LineChart chart{.title = absl::StrCat("fast_p over ", all.size(), " tasks"),
                  .x_label = "p (speedup over eager PyTorch)",
                  .y_label = "share of tasks correct and faster than p",
                  .unit_y = true,
                  .x_range = std::make_pair(0.0, p_max)};
  size_t index = 0;
  for (const auto& [level, tasks] : by_level) {
    chart.series.push_back({.name = LevelName(level),
                            .colour = LevelColour(index++),
                            .points = FastPCurve(tasks, p_max)});
  }
  chart.series.push_back(
      {.name = "overall", .colour = kOverallColour, .points = FastPCurve(all, p_max)});
  return chart;
}

std::string FastPSvg(const v1::EvalReport& report) { return LineChartSvg(FastPChart(report)); }

std::string StackedChartsSvg(const std::vector<LineChart>& charts) {
  std::string svg = SvgOpen(kWidth, kChartHeight * static_cast<int>(charts.size()));
  for (size_t i = 0; i < charts.size(); ++i) {
    svg += ChartGroup(charts[i], kChartHeight * static_cast<int>(i));
  }
  return svg + "</svg>\n";
}

}  // namespace kforge
