#include "xtrain/monitor/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace xtrain::monitor {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(t / 3600), (long long)(t % 3600 / 60));
  } else if (t >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(t / 60), (long long)(t % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", (long long)t);
  }
  return buf;
}

std::string format_rate(double r) {
  char buf[32];
  if (r >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", r / 1e6);
  } else if (r >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.1fk", r / 1e3);
  } else if (r >= 100) {
    std::snprintf(buf, sizeof buf, "%.0f", r);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f", r);
  }
  return buf;
}

std::string sparkline(const std::vector<double>& values, int width) {
  static const char* kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::vector<double> v;
  for (double x : values) if (std::isfinite(x)) v.push_back(x);
  if (v.empty() || width <= 0) return "";
  const int n = std::min<int>(width, static_cast<int>(v.size()));
  std::vector<double> bins(n);
  for (int i = 0; i < n; ++i) {  // mean of each bin
    const size_t a = i * v.size() / n, b = std::max<size_t>(a + 1, (i + 1) * v.size() / n);
    double sum = 0;
    for (size_t j = a; j < b; ++j) sum += v[j];
    bins[i] = sum / static_cast<double>(b - a);
  }
  const auto [lo, hi] = std::minmax_element(bins.begin(), bins.end());
  std::string out;
  for (double x : bins) {
    const int level = *hi > *lo ? static_cast<int>((x - *lo) / (*hi - *lo) * 7.0 + 0.5) : 0;
    out += kBars[std::clamp(level, 0, 7)];
  }
  return out;
}

Progress::Progress(std::string unit, int64_t total_steps, int64_t every, bool enabled)
    : unit_(std::move(unit)), total_(total_steps), every_(std::max<int64_t>(1, every)), enabled_(enabled),
      tty_(isatty(STDERR_FILENO) != 0) {}

void Progress::update(int64_t step, double work, const std::vector<std::pair<std::string, std::string>>& fields) {
  if (first_step_ < 0) first_step_ = step - 1;
  const double now = clock_.seconds();
  work_since_ += work;
  const double dt = now - last_time_;
  if (dt > 0.5 || step == total_) {
    const double instant = work_since_ / std::max(dt, 1e-9);
    rate_ = rate_ == 0 ? instant : 0.7 * rate_ + 0.3 * instant;
    last_time_ = now;
    work_since_ = 0;
  }
  if (!enabled_) return;
  if (!tty_ && step % every_ != 0 && step != total_) return;
  const double per_step = (now) / std::max<int64_t>(1, step - first_step_);
  std::ostringstream line;
  line << "step " << step << "/" << total_;
  for (const auto& [k, v] : fields) line << " | " << k << " " << v;
  line << " | " << format_rate(rate_) << " " << unit_ << "/s | ETA " << format_duration(per_step * (total_ - step));
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line.str().c_str());
    line_open_ = true;
  } else {
    std::fprintf(stderr, "%s\n", line.str().c_str());
  }
  std::fflush(stderr);
}

void Progress::message(const std::string& line) {
  if (line_open_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", line.c_str());
  line_open_ = false;
  std::fflush(stderr);
}

void Progress::finish() {
  if (line_open_) std::fprintf(stderr, "\n");
  line_open_ = false;
}

}  // namespace xtrain::monitor
