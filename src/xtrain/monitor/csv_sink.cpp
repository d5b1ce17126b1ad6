#include "xtrain/monitor/csv_sink.h"

#include <charconv>
#include <cstdio>
#include <filesystem>

#include "xtrain/base/error.h"

namespace xtrain::monitor {
namespace fs = std::filesystem;

CsvSink::CsvSink(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  XTRAIN_USAGE_CHECK(!ec, "monitor: cannot create the CSV folder ", dir, ": ", ec.message(),
                     " (csv_monitor.output_path)");
}

std::string CsvSink::path_for(const std::string& tag) const {
  std::string name = tag;
  for (char& c : name) {
    if (c == '/' || c == ' ') c = '_';
  }
  return (fs::path(dir_) / (name + ".csv")).string();
}

void CsvSink::write(int64_t step, const std::map<std::string, double>& scalars) {
  for (const auto& [tag, value] : scalars) {
    const std::string path = path_for(tag);
    std::FILE* f = std::fopen(path.c_str(), "a");
    XTRAIN_USAGE_CHECK(f != nullptr, "monitor: cannot open ", path, " for appending (csv_monitor.output_path)");
    if (std::ftell(f) == 0) {
      const size_t slash = tag.rfind('/');
      std::fprintf(f, "step,%s\n", (slash == std::string::npos ? tag : tag.substr(slash + 1)).c_str());
    }
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, value);  // shortest form that reads back exactly
    std::fprintf(f, "%lld,%.*s\n", static_cast<long long>(step), static_cast<int>(r.ptr - buf), buf);
    std::fclose(f);
  }
}

}  // namespace xtrain::monitor
