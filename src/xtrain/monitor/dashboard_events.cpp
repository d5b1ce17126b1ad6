#include "xtrain/monitor/dashboard_events.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "xtrain/monitor/dashboard_files.h"
#include "xtrain/monitor/run_reader.h"

namespace xtrain::monitor {
namespace fs = std::filesystem;

std::string sse_event(const std::string& name, const std::string& data) {
  return "event: " + name + "\ndata: " + data + "\n\n";
}

EventStreams::EventStreams(std::string logdir, double poll_seconds)
    : logdir_(std::move(logdir)), poll_seconds_(poll_seconds) {}

std::string EventStreams::poll(Cursor& c) const {
  std::string out;
  if (!c.started) {
    out += "retry: 2000\n" + sse_event("reset", "{}");  // the page drops what it has: all follows
    c.started = true;
  }
  const auto runs = list_contained_runs(logdir_);  // no run that links outside the log folder
  std::string names;
  for (const auto& r : runs) names += r.name + "\n";
  if (names != c.run_names) {
    out += sse_event("runs", runs_json(runs));
    c.run_names = names;
    for (auto it = c.offsets.begin(); it != c.offsets.end();) {  // forget runs that went away
      it = names.find(it->first + "\n") == std::string::npos ? c.offsets.erase(it) : std::next(it);
    }
  }
  for (const auto& r : runs) {
    int64_t& offset = c.offsets[r.name];
    if (r.metrics_bytes == offset) continue;
    const MetricsChunk chunk = read_metrics((fs::path(logdir_) / r.name).string(), offset);
    const std::string run = nlohmann::json(r.name).dump();
    if (chunk.restarted) out += sse_event("restart", "{\"run\":" + run + "}");
    if (!chunk.lines.empty()) {
      out += sse_event("metrics", "{\"run\":" + run + ",\"records\":" + json_array(chunk.lines) + "}");
    }
    offset = chunk.next_offset;
  }
  const auto now = std::chrono::steady_clock::now();
  // A keep-alive every 5 s also finds pages that went away (the write fails), freeing their stream.
  if (out.empty() && now - c.last_sent > std::chrono::seconds(5)) out = ": keep-alive\n\n";
  if (!out.empty()) c.last_sent = now;
  return out;
}

bool EventStreams::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  wake_.wait_for(lock, std::chrono::duration<double>(poll_seconds_), [this] { return stopping_; });
  return !stopping_;
}

void EventStreams::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
}

}  // namespace xtrain::monitor
