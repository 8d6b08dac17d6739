// The SVG charts read back: series pixels against the data they stand for,
// legends, escaping, and the fast_p step curve against the report's fast_p
// figures.
#include "eval/eval_plots.h"

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "eval/eval_metrics.h"
#include "tests/unit/eval/svg_reading.h"

namespace kforge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

v1::Verdict Solved(double speedup) {
  v1::Verdict v;
  v1::StageResult* compile = v.add_stages();
  compile->set_stage(v1::STAGE_COMPILE);
  compile->set_outcome(v1::OUTCOME_PASSED);
  v.set_correct(true);
  v.set_speedup_vs_eager(speedup);
  return v;
}

v1::Verdict Failed() {
  v1::Verdict v;
  v1::StageResult* compile = v.add_stages();
  compile->set_stage(v1::STAGE_COMPILE);
  compile->set_outcome(v1::OUTCOME_FAILED);
  return v;
}

TEST(LineChartTest, SeriesPixelsRunLeftToRightWithYUpAndTheDataAtTheAxisEnds) {
  LineChart chart{.title = "t", .x_label = "x", .y_label = "y"};
  chart.series.push_back({.name = "rising", .colour = "#123456",
                          .points = {{0, 0}, {2.5, 5}, {5, 10}, {10, 20}}});
  chart.series.push_back({.name = "flat", .colour = "red", .points = {{0, 10}, {10, 10}}});
  const std::string svg = LineChartSvg(chart);

  ASSERT_TRUE(WellFormed(svg));
  const std::vector<Rect> areas = PlotAreas(svg);
  ASSERT_EQ(areas.size(), 1u);
  const Rect& a = areas[0];
  const std::vector<ChartPoint> px = SeriesPixels(svg, "rising");
  ASSERT_EQ(px.size(), 4u);
  // x spans the data exactly; y (0..20 is already round) puts 0 at the bottom.
  EXPECT_NEAR(px.front().x, a.x, 0.1);
  EXPECT_NEAR(px.front().y, a.y + a.height, 0.1);
  EXPECT_NEAR(px.back().x, a.x + a.width, 0.1);
  EXPECT_NEAR(px.back().y, a.y, 0.1);
  for (size_t i = 1; i < px.size(); ++i) {
    EXPECT_GT(px[i].x, px[i - 1].x);
    EXPECT_LT(px[i].y, px[i - 1].y);  // larger values higher up
    EXPECT_NEAR(DataX(a, px[i].x, 0, 10), chart.series[0].points[i].x, 0.05);
    EXPECT_NEAR(DataY(a, px[i].y, 0, 20), chart.series[0].points[i].y, 0.05);
  }
  const std::vector<ChartPoint> flat = SeriesPixels(svg, "flat");
  ASSERT_EQ(flat.size(), 2u);
  EXPECT_NEAR(flat[0].y, a.y + a.height / 2, 0.1);
  EXPECT_THAT(LegendNames(svg), ElementsAre("rising", "flat"));
  EXPECT_THAT(svg, HasSubstr("stroke=\"#123456\""));
  EXPECT_THAT(svg, Not(HasSubstr("no-data")));
}

TEST(LineChartTest, AxesCarryNumberedTicksOnRoundValues) {
  LineChart chart{.title = "t", .x_label = "steps", .y_label = "reward"};
  chart.series.push_back({.name = "s", .colour = "blue", .points = {{0, 0.13}, {10, 0.87}}});
  const std::string svg = LineChartSvg(chart);
  static const std::regex kTick(R"re(<text class="tick"[^>]*>([^<]*)</text>)re");
  std::vector<std::string> ticks;
  for (std::sregex_iterator it(svg.begin(), svg.end(), kTick), end; it != end; ++it) {
    ticks.push_back((*it)[1]);
  }
  // y widened from [0.13, 0.87] to whole ticks of 0.2, then x at steps of 2.
  EXPECT_THAT(ticks, ElementsAre("0", "0.2", "0.4", "0.6", "0.8", "1", "0", "2", "4", "6", "8",
                                 "10"));
  EXPECT_THAT(svg, HasSubstr(">steps</text>"));
  EXPECT_THAT(svg, HasSubstr(">reward</text>"));
}

TEST(LineChartTest, UnitRatesUseTheFixedRangeZeroToOne) {
  LineChart chart{.title = "t", .unit_y = true};
  chart.series.push_back({.name = "rate", .colour = "blue", .points = {{1, 0.25}, {2, 0.5}}});
  const std::string svg = LineChartSvg(chart);
  const Rect a = PlotAreas(svg).at(0);
  const std::vector<ChartPoint> px = SeriesPixels(svg, "rate");
  ASSERT_EQ(px.size(), 2u);
  EXPECT_NEAR(px[0].y, a.y + 0.75 * a.height, 0.1);
  EXPECT_NEAR(px[1].y, a.y + 0.5 * a.height, 0.1);
}

TEST(LineChartTest, OnePointIsCentredAndMarkedWithoutDividingByZero) {
  LineChart chart{.title = "t"};
  chart.series.push_back({.name = "once", .colour = "blue", .points = {{3, 7}}});
  const std::string svg = LineChartSvg(chart);
  ASSERT_TRUE(WellFormed(svg));
  EXPECT_THAT(svg, Not(HasSubstr("nan")));
  EXPECT_THAT(svg, Not(HasSubstr("inf")));
  const Rect a = PlotAreas(svg).at(0);
  const std::vector<ChartPoint> px = SeriesPixels(svg, "once");
  ASSERT_EQ(px.size(), 1u);
  EXPECT_NEAR(px[0].x, a.x + a.width / 2, 0.1);
  EXPECT_NEAR(px[0].y, a.y + a.height / 2, 0.1);
  EXPECT_THAT(svg, HasSubstr("<circle"));  // a line of one point is invisible
}

TEST(LineChartTest, AnEmptyChartIsAValidSvgWithANoDataNoteAndItsLegend) {
  LineChart chart{.title = "nothing yet", .unit_y = true};
  chart.series.push_back({.name = "empty", .colour = "blue"});
  chart.series.push_back(
      {.name = "not finite", .colour = "red", .points = {{std::nan(""), 1}, {1, INFINITY}}});
  const std::string svg = LineChartSvg(chart);
  ASSERT_TRUE(WellFormed(svg));
  EXPECT_THAT(svg, HasSubstr("class=\"no-data\""));
  EXPECT_THAT(svg, HasSubstr(">no data</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("<polyline")));
  EXPECT_THAT(svg, Not(HasSubstr("nan")));
  EXPECT_THAT(LegendNames(svg), ElementsAre("empty", "not finite"));
}

TEST(LineChartTest, EscapesXmlSpecialCharactersInEveryText) {
  LineChart chart{.title = "a < b & \"c\" > 'd'", .x_label = "x<1>", .y_label = "y&z"};
  chart.series.push_back({.name = "<s&p>", .colour = "blue", .points = {{0, 0}, {1, 1}}});
  chart.band = ChartBand{.from = 0, .to = 0.5, .label = "warm & cosy"};
  const std::string svg = LineChartSvg(chart);
  ASSERT_TRUE(WellFormed(svg));
  EXPECT_THAT(svg, HasSubstr("a &lt; b &amp; &quot;c&quot; &gt; &apos;d&apos;"));
  EXPECT_THAT(svg, HasSubstr(">x&lt;1&gt;</text>"));
  EXPECT_THAT(svg, HasSubstr(">y&amp;z</text>"));
  EXPECT_THAT(svg, HasSubstr("warm &amp; cosy"));
  EXPECT_THAT(LegendNames(svg), ElementsAre("&lt;s&amp;p&gt;"));
  EXPECT_EQ(SeriesPixels(svg, "&lt;s&amp;p&gt;").size(), 2u);
}

// Three solved tasks, timed at 0.5x and 2x (level 1) and 1.5x (level 2).
v1::EvalReport AllSolved() {
  return SummarizeEval({{.task_id = "level1/a", .level = 1, .verdicts = {Solved(0.5)}},
                        {.task_id = "level1/b", .level = 1, .verdicts = {Failed(), Solved(2.0)}},
                        {.task_id = "level2/c", .level = 2, .verdicts = {Solved(1.5)}}});
}

// The curve's value at p: the last point at or before it (drops are
// vertical), `slack` allowing for pixel rounding.
double ValueAt(const std::vector<ChartPoint>& points, double p, double slack = 1e-9) {
  double value = points.at(0).y;
  for (const ChartPoint& point : points) {
    if (point.x <= p + slack) value = point.y;
  }
  return value;
}

TEST(FastPChartTest, OverallStartsAtOneWhenEveryTaskIsSolvedAndDropsAtEachSpeedup) {
  const v1::EvalReport report = AllSolved();
  const LineChart chart = FastPChart(report);
  const std::string svg = FastPSvg(report);
  ASSERT_TRUE(WellFormed(svg));
  EXPECT_THAT(LegendNames(svg), ElementsAre("level 1", "level 2", "overall"));
  const double p_max = chart.series.back().points.back().x;
  EXPECT_GT(p_max, 2.0);  // a bit beyond the largest speedup
  EXPECT_LT(p_max, 3.0);

  // Read back from the drawn overall polyline: y 0..1, x 0..p_max.
  const Rect a = PlotAreas(svg).at(0);
  std::vector<ChartPoint> curve;
  for (const ChartPoint& px : SeriesPixels(svg, "overall")) {
    curve.push_back({DataX(a, px.x, 0, p_max), DataY(a, px.y, 0, 1)});
  }
  ASSERT_FALSE(curve.empty());
  EXPECT_NEAR(curve.front().x, 0, 1e-3);
  EXPECT_NEAR(curve.front().y, 1.0, 1e-3);
  std::vector<double> drops;
  for (size_t i = 1; i < curve.size(); ++i) {
    EXPECT_GE(curve[i].x, curve[i - 1].x - 1e-3);
    EXPECT_LE(curve[i].y, curve[i - 1].y + 1e-3);  // never rises
    if (curve[i].y < curve[i - 1].y - 1e-3) drops.push_back(curve[i].x);
  }
  ASSERT_EQ(drops.size(), 3u);
  EXPECT_NEAR(drops[0], 0.5, 0.01);
  EXPECT_NEAR(drops[1], 1.5, 0.01);
  EXPECT_NEAR(drops[2], 2.0, 0.01);
  EXPECT_NEAR(curve.back().y, 0, 1e-3);
  // The curve agrees with the report's own fast_p figures.
  for (const char* p : {"0", "1", "1.5", "2"}) {
    EXPECT_NEAR(ValueAt(curve, std::stod(p), 0.01), report.overall().fast_p().at(p), 0.01) << p;
  }
  EXPECT_NEAR(ValueAt(chart.series[0].points, 1.0), report.levels(0).fast_p().at("1"), 1e-12);
}

TEST(FastPChartTest, SolvedButUntimedTasksCountOnlyAtZeroAndUnsolvedNever) {
  const v1::EvalReport report = SummarizeEval(
      {{.task_id = "level1/untimed", .level = 1, .verdicts = {Solved(0)}},
       {.task_id = "level1/timed", .level = 1, .verdicts = {Solved(1.5)}},
       {.task_id = "level1/wrong", .level = 1, .verdicts = {Failed()}}});
  const LineChart chart = FastPChart(report);
  ASSERT_EQ(chart.series.size(), 2u);
  const std::vector<ChartPoint>& overall = chart.series.back().points;
  ASSERT_EQ(overall.size(), 5u);
  EXPECT_NEAR(overall[0].y, 2.0 / 3, 1e-12);  // fast_0: solved at all
  EXPECT_DOUBLE_EQ(overall[1].x, 0);
  EXPECT_NEAR(overall[1].y, 1.0 / 3, 1e-12);  // faster than nothing: timed only
  EXPECT_DOUBLE_EQ(overall[3].x, 1.5);
  EXPECT_DOUBLE_EQ(overall[3].y, 0);
  EXPECT_GT(overall[4].x, 1.5);
}

TEST(FastPChartTest, WithNoTaskTimedOnlyFast0IsDrawnNotALineAlongZero) {
  // Timing off, or no baseline ran: solved tasks, no speedups.
  const v1::EvalReport report = SummarizeEval(
      {{.task_id = "level1/untimed", .level = 1, .verdicts = {Solved(0)}},
       {.task_id = "level1/wrong", .level = 1, .verdicts = {Failed()}}});
  const LineChart chart = FastPChart(report);
  const std::vector<ChartPoint>& overall = chart.series.back().points;
  ASSERT_EQ(overall.size(), 1u);
  EXPECT_DOUBLE_EQ(overall[0].x, 0);
  EXPECT_DOUBLE_EQ(overall[0].y, 0.5);
  ASSERT_TRUE(chart.x_range.has_value());  // the p axis still reaches past 1
  EXPECT_GT(chart.x_range->second, 1.0);
  EXPECT_TRUE(WellFormed(FastPSvg(report)));
  // Nothing timed: the histogram says so instead of drawing empty bars.
  const std::string histogram = SpeedupHistogramSvg(report);
  EXPECT_TRUE(WellFormed(histogram));
  EXPECT_THAT(histogram, HasSubstr("not measured"));
  EXPECT_THAT(histogram, Not(HasSubstr("<rect")));
}

TEST(PassAtKChartTest, OneSeriesPerLevelAndOverallAgainstK) {
  const v1::EvalReport report = SummarizeEval(
      {{.task_id = "level1/a", .level = 1, .verdicts = {Solved(1), Failed()}},
       {.task_id = "level2/b", .level = 2, .verdicts = {Solved(1), Solved(1)}}},
      {.ks = {1, 2}});
  const std::string svg = PassAtKSvg(report);
  ASSERT_TRUE(WellFormed(svg));
  EXPECT_THAT(LegendNames(svg), ElementsAre("level 1", "level 2", "overall"));
  const Rect a = PlotAreas(svg).at(0);
  const std::vector<ChartPoint> level1 = SeriesPixels(svg, "level 1");
  ASSERT_EQ(level1.size(), 2u);
  // k = 1 and k = 2 at the axis ends; pass@1 = 0.5, pass@2 = 1 on [0, 1].
  EXPECT_NEAR(level1[0].x, a.x, 0.1);
  EXPECT_NEAR(level1[1].x, a.x + a.width, 0.1);
  EXPECT_NEAR(DataY(a, level1[0].y, 0, 1), 0.5, 1e-3);
  EXPECT_NEAR(DataY(a, level1[1].y, 0, 1), 1.0, 1e-3);
  const std::vector<ChartPoint> overall = SeriesPixels(svg, "overall");
  ASSERT_EQ(overall.size(), 2u);
  EXPECT_NEAR(DataY(a, overall[0].y, 0, 1), report.overall().pass_at_k().at(1), 1e-3);
}

TEST(ReportChartsTest, AnEmptyReportGivesValidChartsWithANoDataNote) {
  const v1::EvalReport empty;
  for (const std::string& svg : {PassAtKSvg(empty), FastPSvg(empty)}) {
    ASSERT_TRUE(WellFormed(svg));
    EXPECT_THAT(svg, HasSubstr("class=\"no-data\""));
    EXPECT_THAT(LegendNames(svg), ElementsAre("overall"));
  }
  EXPECT_TRUE(WellFormed(SpeedupHistogramSvg(empty)));
  EXPECT_TRUE(WellFormed(SpeedupHistogramSvg(AllSolved())));
}

}  // namespace
}  // namespace kforge
