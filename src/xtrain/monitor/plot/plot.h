// Line charts as PNG files (`xtrain tune`'s convergence plot, bench/attention_bench's scaling plot):
// several series, optional log axes, ticks and labels drawn with a built-in bitmap font, encoded
// with zlib. No plotting library is packaged in Debian for C++; this is small and dependency-free.
// monitor/plot/ holds the whole raster stack (plot, canvas, png, bitmap_font): monitor is layer 1,
// so both its users (cli/ and bench/) reach it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::monitor {

struct Series {
  std::string label;
  std::vector<double> x, y;
};

struct PlotOptions {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  int width = 800, height = 500;
};

// The colour of series `index` (Tableau 10, cycling): what a reader of the PNG looks for.
struct Rgb {
  uint8_t r, g, b;
};
Rgb series_color(size_t index);

// Writes `path` (PNG). Non-finite points are skipped. UsageError when the file cannot be written.
void write_line_plot_png(const std::string& path, const std::vector<Series>& series, const PlotOptions& options);

}  // namespace xtrain::monitor
