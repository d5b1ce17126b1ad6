// An RGB raster for plots: pixels, rectangles, thick lines (Bresenham with a square brush) and
// text in the built-in bitmap font, horizontal or rotated 90° counter-clockwise. Drawing is clipped
// to a settable rectangle, so series never paint over the axes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/monitor/plot/plot.h"

namespace xtrain::monitor {

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);
  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<uint8_t>& rgb() const { return rgb_; }

  void set_clip(int x0, int y0, int x1, int y1);  // inclusive pixel bounds
  void clear_clip() { set_clip(0, 0, width_ - 1, height_ - 1); }
  void pixel(int x, int y, Rgb c);
  void fill_rect(int x0, int y0, int x1, int y1, Rgb c);  // inclusive
  void line(double x0, double y0, double x1, double y1, Rgb c, int thickness = 1);
  // Top-left corner at (x, y).
  void text(int x, int y, const std::string& s, Rgb c, int scale = 1);
  // Reads bottom to top; (x, y) is the bottom-left corner of the first glyph.
  void text_vertical(int x, int y, const std::string& s, Rgb c, int scale = 1);

 private:
  int width_, height_;
  int cx0_ = 0, cy0_ = 0, cx1_ = 0, cy1_ = 0;
  std::vector<uint8_t> rgb_;
};

}  // namespace xtrain::monitor
