#include "xtrain/monitor/jsonl_sink.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>

#include "xtrain/base/error.h"

namespace xtrain::monitor {
namespace {
double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

JsonlSink::JsonlSink(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {
  XTRAIN_USAGE_CHECK(file_ != nullptr, "monitor: cannot open ", path, " for writing");
}

JsonlSink::~JsonlSink() {
  if (file_) std::fclose(file_);
}

void JsonlSink::write(int64_t step, const std::map<std::string, double>& scalars) {
  nlohmann::json j = {{"step", step}, {"time", unix_seconds()}};
  for (const auto& [name, value] : scalars) {
    j[name] = std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(std::to_string(value));
  }
  const std::string line = j.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

void JsonlSink::write_text(int64_t step, const std::string& tag, const std::string& text) {
  nlohmann::json j = {{"step", step}, {"time", unix_seconds()}, {"event", tag}, {"text", text}};
  const std::string line = j.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

void JsonlSink::flush() { std::fflush(file_); }

}  // namespace xtrain::monitor
