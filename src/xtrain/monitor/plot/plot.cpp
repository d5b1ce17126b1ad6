// Layout: title on top, y label rotated at the left, tick labels outside a framed plot area with
// light grid lines, x label at the bottom, legend in the plot's top-right corner. Linear axes get
// 1-2-5 ticks; log axes get decades (plus 2 and 5 within a decade when the range is short).
#include "xtrain/monitor/plot/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "xtrain/base/error.h"
#include "xtrain/monitor/plot/bitmap_font.h"
#include "xtrain/monitor/plot/canvas.h"
#include "xtrain/monitor/plot/png.h"

namespace xtrain::monitor {
namespace {

constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0}, kGrid{225, 225, 225}, kTickText{60, 60, 60};

// One axis in data units; `log` maps through log10. Pixels: [p0, p1] (p1 < p0 for y).
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double p0 = 0, p1 = 1;
  double t(double v) const { return log ? std::log10(v) : v; }
  double to_pixel(double v) const { return p0 + (t(v) - t(lo)) / (t(hi) - t(lo)) * (p1 - p0); }
  bool usable(double v) const { return std::isfinite(v) && (!log || v > 0); }
};

// Data range of the usable values, widened when empty or flat, padded 4% (of the log range on log axes).
void fit_range(Axis& a, const std::vector<double>& values) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values) {
    if (!a.usable(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (!(lo <= hi)) {
    lo = a.log ? 1.0 : 0.0;
    hi = a.log ? 10.0 : 1.0;
  }
  if (a.log) {
    if (hi / lo < 1.0001) lo /= 2, hi *= 2;
    const double pad = std::pow(hi / lo, 0.04);
    a.lo = lo / pad;
    a.hi = hi * pad;
    return;
  }
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) lo -= 1, hi += 1;
  const double pad = 0.04 * (hi - lo);
  a.lo = lo - pad;
  a.hi = hi + pad;
}

std::vector<double> linear_ticks(double lo, double hi) {
  const double raw = (hi - lo) / 6.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double n = raw / mag;
  const double step = (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
  std::vector<double> out;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) {
    out.push_back(std::abs(v) < 1e-9 * step ? 0.0 : v);
  }
  return out;
}

std::vector<double> log_ticks(double lo, double hi) {
  const int d0 = static_cast<int>(std::floor(std::log10(lo))), d1 = static_cast<int>(std::ceil(std::log10(hi)));
  const bool short_range = d1 - d0 <= 2;
  const int stride = std::max(1, (d1 - d0) / 8);
  std::vector<double> out;
  for (int d = d0; d <= d1; d += stride) {
    for (double m : short_range ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
      const double v = m * std::pow(10.0, d);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push_back(v);
    }
  }
  return out;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

void draw_axes(Canvas& c, const Axis& x, const Axis& y) {
  const int left = int(x.p0), right = int(x.p1), top = int(y.p1), bottom = int(y.p0);
  const auto xt = x.log ? log_ticks(x.lo, x.hi) : linear_ticks(x.lo, x.hi);
  const auto yt = y.log ? log_ticks(y.lo, y.hi) : linear_ticks(y.lo, y.hi);
  for (double v : xt) {
    const int px = int(std::lround(x.to_pixel(v)));
    c.fill_rect(px, top, px, bottom, kGrid);
    c.fill_rect(px, bottom, px, bottom + 4, kBlack);
    const std::string s = tick_label(v);
    c.text(px - font::text_width(s) / 2, bottom + 8, s, kTickText);
  }
  for (double v : yt) {
    const int py = int(std::lround(y.to_pixel(v)));
    c.fill_rect(left, py, right, py, kGrid);
    c.fill_rect(left - 4, py, left, py, kBlack);
    const std::string s = tick_label(v);
    c.text(left - 8 - font::text_width(s), py - font::kGlyphHeight / 2, s, kTickText);
  }
  c.fill_rect(left, top, right, top, kBlack);
  c.fill_rect(left, bottom, right, bottom, kBlack);
  c.fill_rect(left, top, left, bottom, kBlack);
  c.fill_rect(right, top, right, bottom, kBlack);
}

void draw_series(Canvas& c, const Axis& x, const Axis& y, const Series& s, Rgb color) {
  const size_t n = std::min(s.x.size(), s.y.size());
  bool have_prev = false;
  double px = 0, py = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!x.usable(s.x[i]) || !y.usable(s.y[i])) {
      have_prev = false;  // a gap: do not bridge skipped points
      continue;
    }
    const double qx = x.to_pixel(s.x[i]), qy = y.to_pixel(s.y[i]);
    c.line(have_prev ? px : qx, have_prev ? py : qy, qx, qy, color, 2);
    px = qx;
    py = qy;
    have_prev = true;
  }
}

void draw_legend(Canvas& c, const std::vector<Series>& series, int right, int top) {
  int widest = 0;
  for (const auto& s : series) widest = std::max(widest, font::text_width(s.label));
  if (widest == 0) return;
  const int row = 14, w = widest + 34, h = row * static_cast<int>(series.size()) + 8;
  const int x0 = right - w - 8, y0 = top + 8;
  c.fill_rect(x0, y0, x0 + w, y0 + h, kWhite);
  c.fill_rect(x0, y0, x0 + w, y0, kTickText);
  c.fill_rect(x0, y0 + h, x0 + w, y0 + h, kTickText);
  c.fill_rect(x0, y0, x0, y0 + h, kTickText);
  c.fill_rect(x0 + w, y0, x0 + w, y0 + h, kTickText);
  for (size_t i = 0; i < series.size(); ++i) {
    const int y = y0 + 5 + static_cast<int>(i) * row;
    c.fill_rect(x0 + 6, y + 3, x0 + 24, y + 4, series_color(i));
    c.text(x0 + 30, y, series[i].label, kBlack);
  }
}

}  // namespace

Rgb series_color(size_t index) {
  static const Rgb kPalette[] = {{31, 119, 180}, {255, 127, 14},  {44, 160, 44},  {214, 39, 40},
                                 {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127},
                                 {188, 189, 34},  {23, 190, 207}};
  return kPalette[index % 10];
}

void write_line_plot_png(const std::string& path, const std::vector<Series>& series, const PlotOptions& o) {
  XTRAIN_USAGE_CHECK(o.width >= 160 && o.height >= 120 && o.width <= 8192 && o.height <= 8192,
                     "monitor: plot size must be within 160x120 .. 8192x8192, got ", o.width, "x", o.height);
  Canvas c(o.width, o.height, kWhite);
  Axis x, y;
  x.log = o.log_x;
  y.log = o.log_y;
  std::vector<double> xs, ys;
  for (const auto& s : series) {
    xs.insert(xs.end(), s.x.begin(), s.x.end());
    ys.insert(ys.end(), s.y.begin(), s.y.end());
  }
  fit_range(x, xs);
  fit_range(y, ys);
  const int left = 78, right = o.width - 16, top = o.title.empty() ? 16 : 36, bottom = o.height - 44;
  x.p0 = left;
  x.p1 = right;
  y.p0 = bottom;
  y.p1 = top;
  if (!o.title.empty()) c.text((o.width - font::text_width(o.title, 2)) / 2, 10, o.title, kBlack, 2);
  if (!o.x_label.empty()) c.text((left + right - font::text_width(o.x_label)) / 2, o.height - 16, o.x_label, kBlack);
  if (!o.y_label.empty()) c.text_vertical(8, (top + bottom + font::text_width(o.y_label)) / 2, o.y_label, kBlack);
  draw_axes(c, x, y);
  c.set_clip(left + 1, top + 1, right - 1, bottom - 1);
  for (size_t i = 0; i < series.size(); ++i) draw_series(c, x, y, series[i], series_color(i));
  c.clear_clip();
  draw_legend(c, series, right, top);
  write_png_rgb(path, c.width(), c.height(), c.rgb());
}

}  // namespace xtrain::monitor
