// PNG line plots, read back by an independent decoder (tests/monitor/plot/check_png.py: PIL via
// /usr/bin/python3): size, colour type, and where each series' colour lands — a straight line in
// data space must be a straight run of pixels, rising or falling as the data does.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/monitor/plot/plot.h"

namespace xtrain::monitor::plot_test {
namespace {

std::string color_arg(Rgb c) { return std::to_string(c.r) + "," + std::to_string(c.g) + "," + std::to_string(c.b); }

nlohmann::json read_png(const std::string& path, const std::vector<Rgb>& colors) {
  std::string cmd = "/usr/bin/python3 " + testing::source_dir() + "/tests/monitor/plot/check_png.py " + path;
  for (const auto& c : colors) cmd += " " + color_arg(c);
  std::string out;
  const int rc = testing::run_command(cmd, &out);
  EXPECT_EQ(rc, 0) << out;
  return rc == 0 ? nlohmann::json::parse(out) : nlohmann::json::object();
}

Series line(const std::string& label, double slope, double offset, int n = 101) {
  Series s{label, {}, {}};
  for (int i = 0; i < n; ++i) {
    s.x.push_back(i);
    s.y.push_back(offset + slope * i);
  }
  return s;
}

TEST(Plot, TwoLinesLandWhereTheDataSays) {
  const std::string path = testing::temp_dir("plot") + "/lines.png";
  PlotOptions o;
  o.title = "Two lines";
  o.x_label = "step";
  o.y_label = "value";
  o.width = 640;
  o.height = 400;
  // No labels: no legend, so every pixel of a series' colour belongs to its line.
  write_line_plot_png(path, {line("", 1.0, 0.0), line("", -1.0, 100.0)}, o);
  const auto j = read_png(path, {series_color(0), series_color(1)});
  EXPECT_EQ(j["format"], "PNG");
  EXPECT_EQ(j["mode"], "RGB");
  EXPECT_EQ(j["width"], 640);
  EXPECT_EQ(j["height"], 400);
  const auto& up = j["colors"][color_arg(series_color(0))];
  const auto& down = j["colors"][color_arg(series_color(1))];
  // A 2-pixel line across most of a ~550-pixel-wide plot area.
  EXPECT_GT(up["count"].get<int>(), 600);
  EXPECT_GT(down["count"].get<int>(), 600);
  EXPECT_GT(up["corr"].get<double>(), 0.995);
  EXPECT_LT(down["corr"].get<double>(), -0.995);
  // Both span (nearly) the same horizontal extent: the full x range, inside the frame.
  EXPECT_NEAR(up["bbox"][0].get<int>(), down["bbox"][0].get<int>(), 2);
  EXPECT_NEAR(up["bbox"][2].get<int>(), down["bbox"][2].get<int>(), 2);
  EXPECT_GT(up["bbox"][2].get<int>() - up["bbox"][0].get<int>(), 450);
}

TEST(Plot, LogAxisStraightensAnExponential) {
  Series s{"", {}, {}};
  for (int i = 0; i <= 100; ++i) {
    s.x.push_back(i);
    s.y.push_back(std::pow(10.0, i / 25.0));  // 1 .. 1e4
  }
  const std::string dir = testing::temp_dir("plot");
  PlotOptions o;
  write_line_plot_png(dir + "/lin.png", {s}, o);
  o.log_y = true;
  write_line_plot_png(dir + "/log.png", {s}, o);
  const double lin = read_png(dir + "/lin.png", {series_color(0)})["colors"][color_arg(series_color(0))]["corr"];
  const double log = read_png(dir + "/log.png", {series_color(0)})["colors"][color_arg(series_color(0))]["corr"];
  EXPECT_GT(log, 0.995);  // straight in log space
  EXPECT_LT(lin, 0.9);    // a hockey stick on a linear axis
}

TEST(Plot, LegendSkipsNonFiniteAndLogNonPositive) {
  Series a = line("loss", -0.5, 60.0), b = line("val loss", -0.4, 70.0);
  a.y[10] = NAN;
  a.y[11] = INFINITY;
  b.y[0] = -1.0;  // not drawable on a log axis: skipped
  const std::string path = testing::temp_dir("plot") + "/legend.png";
  PlotOptions o;
  o.log_y = true;
  o.log_x = false;
  write_line_plot_png(path, {a, b, line("third", 0.1, 1.0)}, o);
  const auto j = read_png(path, {series_color(0), series_color(1), series_color(2)});
  for (size_t i = 0; i < 3; ++i) EXPECT_GT(j["colors"][color_arg(series_color(i))]["count"].get<int>(), 300) << i;
  // The legend swatches sit in the top-right corner: every colour reaches the top 60 pixels there.
  for (size_t i = 0; i < 3; ++i) {
    const auto& bbox = j["colors"][color_arg(series_color(i))]["bbox"];
    EXPECT_GT(bbox[2].get<int>(), 700) << i;
  }
}

TEST(Plot, UnwritablePathIsAUsageError) {
  EXPECT_THROW(write_line_plot_png("/nonexistent-dir/x.png", {line("a", 1, 0)}, PlotOptions{}), UsageError);
  PlotOptions tiny;
  tiny.width = 10;
  EXPECT_THROW(write_line_plot_png(testing::temp_dir("plot") + "/t.png", {}, tiny), UsageError);
}

}  // namespace
}  // namespace xtrain::monitor::plot_test
