#include "xtrain/monitor/plot/canvas.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "xtrain/monitor/plot/bitmap_font.h"

namespace xtrain::monitor {

Canvas::Canvas(int width, int height, Rgb background)
    : width_(width), height_(height), rgb_(size_t(width) * height * 3) {
  for (size_t i = 0; i < rgb_.size(); i += 3) {
    rgb_[i] = background.r;
    rgb_[i + 1] = background.g;
    rgb_[i + 2] = background.b;
  }
  clear_clip();
}

void Canvas::set_clip(int x0, int y0, int x1, int y1) {
  cx0_ = std::max(0, x0);
  cy0_ = std::max(0, y0);
  cx1_ = std::min(width_ - 1, x1);
  cy1_ = std::min(height_ - 1, y1);
}

void Canvas::pixel(int x, int y, Rgb c) {
  if (x < cx0_ || x > cx1_ || y < cy0_ || y > cy1_) return;
  uint8_t* p = &rgb_[(size_t(y) * width_ + x) * 3];
  p[0] = c.r;
  p[1] = c.g;
  p[2] = c.b;
}

void Canvas::fill_rect(int x0, int y0, int x1, int y1, Rgb c) {
  for (int y = y0; y <= y1; ++y)
    for (int x = x0; x <= x1; ++x) pixel(x, y, c);
}

void Canvas::line(double fx0, double fy0, double fx1, double fy1, Rgb c, int thickness) {
  // Far-off points (a log axis near 0, a huge outlier) would make Bresenham walk millions of
  // pixels outside the clip: clamp to a band around the canvas first.
  const double lim = 4.0 * std::max(width_, height_);
  auto clamp = [lim](double v) { return std::clamp(v, -lim, lim); };
  int x0 = static_cast<int>(std::lround(clamp(fx0))), y0 = static_cast<int>(std::lround(clamp(fy0)));
  const int x1 = static_cast<int>(std::lround(clamp(fx1))), y1 = static_cast<int>(std::lround(clamp(fy1)));
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  const int lo = -(thickness - 1) / 2, hi = thickness / 2;
  int err = dx + dy;
  while (true) {
    fill_rect(x0 + lo, y0 + lo, x0 + hi, y0 + hi, c);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

void Canvas::text(int x, int y, const std::string& s, Rgb c, int scale) {
  for (size_t i = 0; i < s.size(); ++i) {
    const uint8_t* g = font::glyph(s[i]);
    const int gx = x + static_cast<int>(i) * font::kAdvance * scale;
    for (int col = 0; col < font::kGlyphWidth; ++col)
      for (int row = 0; row < font::kGlyphHeight; ++row)
        if (g[col] >> row & 1) fill_rect(gx + col * scale, y + row * scale, gx + col * scale + scale - 1,
                                         y + row * scale + scale - 1, c);
  }
}

void Canvas::text_vertical(int x, int y, const std::string& s, Rgb c, int scale) {
  // Rotated counter-clockwise: glyph column -> upward, glyph row -> rightward.
  for (size_t i = 0; i < s.size(); ++i) {
    const uint8_t* g = font::glyph(s[i]);
    const int gy = y - static_cast<int>(i) * font::kAdvance * scale;
    for (int col = 0; col < font::kGlyphWidth; ++col)
      for (int row = 0; row < font::kGlyphHeight; ++row)
        if (g[col] >> row & 1) fill_rect(x + row * scale, gy - col * scale - scale + 1, x + row * scale + scale - 1,
                                         gy - col * scale, c);
  }
}

}  // namespace xtrain::monitor
