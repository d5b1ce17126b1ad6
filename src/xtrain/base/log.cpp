#include "xtrain/base/log.h"

#include <unistd.h>

namespace xtrain::log {
namespace {
Settings g_settings;  // process-wide output policy; set once by the CLI
}

void configure(const Settings& settings) { g_settings = settings; }
const Settings& settings() { return g_settings; }

void write(Level level, const std::string& message) {
  if (level < g_settings.level) return;
  if (level < Level::kWarn && g_settings.rank != 0 && !g_settings.all_ranks) return;
  std::string line;
  if (level == Level::kWarn) line = "warning: ";
  if (level == Level::kError) line = "error: ";
  line += message;
  if (line.empty() || line.back() != '\n') line += '\n';
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace xtrain::log
