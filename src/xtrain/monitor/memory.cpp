#include "xtrain/monitor/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace xtrain::monitor {

int64_t rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long size = 0, resident = 0;  // in pages
  const int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

int64_t peak_rss_bytes() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

std::map<std::string, double> memory_metrics(const std::map<std::string, int64_t>& area_bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  std::map<std::string, double> m = {{"memory/rss_mb", static_cast<double>(rss_bytes()) / kMiB},
                                     {"memory/peak_rss_mb", static_cast<double>(peak_rss_bytes()) / kMiB}};
  for (const auto& [name, bytes] : area_bytes) m["memory/" + name + "_mb"] = static_cast<double>(bytes) / kMiB;
  return m;
}

std::string memory_breakdown_line(const std::string& stage, const std::map<std::string, int64_t>& area_bytes) {
  auto mib = [](int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
    return std::string(buf);
  };
  const int64_t rss = rss_bytes();  // the peak (ru_maxrss) can trail it by rounding: never print less
  std::string line = "memory " + stage + ": rss " + mib(rss) + " | peak " + mib(std::max(rss, peak_rss_bytes()));
  for (const auto& [name, bytes] : area_bytes) line += " | " + name + " " + mib(bytes);
  return line;
}

}  // namespace xtrain::monitor
