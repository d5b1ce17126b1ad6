// Rank-aware logging to stderr. The rank and the "only rank 0 prints" policy are set once by
// whoever owns the process (the CLI), not read from globals elsewhere; each call is one write(2),
// so lines from several processes do not interleave mid-line.
#pragma once
#include <c10/util/StringUtil.h>

#include <string>

namespace xtrain::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

struct Settings {
  int rank = 0;
  bool all_ranks = false;  // false: info/debug only from rank 0; warnings and errors from all
  Level level = Level::kInfo;
};

void configure(const Settings& settings);
const Settings& settings();
void write(Level level, const std::string& message);

template <typename... Args>
void debug(const Args&... args) { write(Level::kDebug, c10::str(args...)); }
template <typename... Args>
void info(const Args&... args) { write(Level::kInfo, c10::str(args...)); }
template <typename... Args>
void warn(const Args&... args) { write(Level::kWarn, c10::str(args...)); }
template <typename... Args>
void error(const Args&... args) { write(Level::kError, c10::str(args...)); }

}  // namespace xtrain::log
