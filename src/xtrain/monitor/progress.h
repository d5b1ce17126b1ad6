// The console progress line: step, loss, lr, rate, ETA (and whatever else the trainer adds). On a
// terminal it rewrites one line in place; otherwise (logs, CI) it prints a line every `every`
// steps. Rate is an exponential moving average so the ETA settles quickly and stays stable.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/base/stopwatch.h"

namespace xtrain::monitor {

std::string format_duration(double seconds);      // "3m12s", "1h04m", "45s"
std::string format_rate(double per_second);       // "12.3k", "950", "1.20M"
// A text sparkline of the values (▁▂▃▄▅▆▇█), resampled to `width` characters.
std::string sparkline(const std::vector<double>& values, int width = 40);

class Progress {
 public:
  Progress(std::string unit, int64_t total_steps, int64_t every, bool enabled);
  // Call once per optimizer step with the work it did (tokens or samples).
  void update(int64_t step, double work, const std::vector<std::pair<std::string, std::string>>& fields);
  // Prints `line` without breaking an in-place progress line.
  void message(const std::string& line);
  void finish();
  double rate() const { return rate_; }
  double elapsed() const { return clock_.seconds(); }

 private:
  std::string unit_;
  int64_t total_, every_;
  bool enabled_, tty_;
  bool line_open_ = false;
  Stopwatch clock_;
  double last_time_ = 0, rate_ = 0, work_since_ = 0;
  int64_t first_step_ = -1;
};

}  // namespace xtrain::monitor
