// Reading the charts of eval/eval_plots.h back in tests: plot frames, the
// pixels of a series, legend entries, and enough XML well-formedness to
// catch a broken document.
#ifndef KFORGE_TESTS_UNIT_EVAL_SVG_READING_H_
#define KFORGE_TESTS_UNIT_EVAL_SVG_READING_H_

#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "eval/eval_plots.h"

namespace kforge {

struct Rect {
  double x = 0, y = 0, width = 0, height = 0;
};

// The plot frames of `svg`, in document order (one per chart).
inline std::vector<Rect> PlotAreas(const std::string& svg) {
  static const std::regex kArea(R"re(<rect class="plot-area" x="([-0-9.]+)" y="([-0-9.]+)" )re"
                                R"re(width="([-0-9.]+)" height="([-0-9.]+)")re");
  std::vector<Rect> areas;
  for (std::sregex_iterator it(svg.begin(), svg.end(), kArea), end; it != end; ++it) {
    areas.push_back({std::stod((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3]),
                     std::stod((*it)[4])});
  }
  return areas;
}

// The pixel coordinates of series `name`'s polyline; empty when it has none.
inline std::vector<ChartPoint> SeriesPixels(const std::string& svg, const std::string& name) {
  const std::regex polyline("<polyline class=\"series\" data-series=\"" + name +
                            "\" points=\"([^\"]*)\"");
  std::smatch match;
  if (!std::regex_search(svg, match, polyline)) return {};
  static const std::regex kPoint(R"(([-0-9.]+),([-0-9.]+))");
  const std::string points = match[1];
  std::vector<ChartPoint> out;
  for (std::sregex_iterator it(points.begin(), points.end(), kPoint), end; it != end; ++it) {
    out.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
  }
  return out;
}

inline std::vector<std::string> LegendNames(const std::string& svg) {
  static const std::regex kLegend(R"re(<text class="legend"[^>]*>([^<]*)</text>)re");
  std::vector<std::string> names;
  for (std::sregex_iterator it(svg.begin(), svg.end(), kLegend), end; it != end; ++it) {
    names.push_back((*it)[1]);
  }
  return names;
}

// Enough of XML well-formedness to catch a broken chart: one <svg> root,
// every element closed in order, quoted attributes, every '&' an entity.
inline ::testing::AssertionResult WellFormed(const std::string& svg) {
  static const std::regex kTag(
      R"re(<(/?)([a-zA-Z]+)((?:\s+[a-zA-Z][a-zA-Z0-9:-]*="[^"<]*")*)\s*(/?)>)re");
  static const std::regex kAmpersand(R"(&(?!(amp|lt|gt|quot|apos);))");
  if (svg.rfind("<svg ", 0) != 0) return ::testing::AssertionFailure() << "no <svg> root first";
  if (std::regex_search(svg, kAmpersand)) return ::testing::AssertionFailure() << "a bare &";
  std::vector<std::string> open;
  size_t at = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), kTag), end; it != end; ++it) {
    const std::string between = svg.substr(at, it->position() - at);
    if (between.find_first_of("<>") != std::string::npos) {
      return ::testing::AssertionFailure() << "a stray < or > in: " << between;
    }
    at = it->position() + it->length();
    const bool closing = (*it)[1] == "/", empty = (*it)[4] == "/";
    if (closing) {
      if (open.empty() || open.back() != (*it)[2]) {
        return ::testing::AssertionFailure() << "</" << (*it)[2] << "> closes nothing open";
      }
      open.pop_back();
    } else if (!empty) {
      if (open.empty() && it->position() > 0) return ::testing::AssertionFailure() << "two roots";
      open.push_back((*it)[2]);
    }
  }
  if (!open.empty()) return ::testing::AssertionFailure() << "<" << open.back() << "> left open";
  if (svg.find_first_not_of(" \n", at) != std::string::npos) {
    return ::testing::AssertionFailure() << "text after the root: " << svg.substr(at);
  }
  return ::testing::AssertionSuccess();
}

// Pixels back to data on an axis spanning [lo, hi].
inline double DataX(const Rect& area, double px, double lo, double hi) {
  return lo + (px - area.x) / area.width * (hi - lo);
}
inline double DataY(const Rect& area, double py, double lo, double hi) {
  return lo + (area.y + area.height - py) / area.height * (hi - lo);
}

// The centres of series `name`'s dots (<circle class="point">), in order.
inline std::vector<ChartPoint> PointPixels(const std::string& svg, const std::string& name) {
  const std::regex circle("<circle class=\"point\" data-series=\"" + name +
                          "\" cx=\"([-0-9.]+)\" cy=\"([-0-9.]+)\"");
  std::vector<ChartPoint> out;
  for (std::sregex_iterator it(svg.begin(), svg.end(), circle), end; it != end; ++it) {
    out.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
  }
  return out;
}

}  // namespace kforge

#endif  // KFORGE_TESTS_UNIT_EVAL_SVG_READING_H_
