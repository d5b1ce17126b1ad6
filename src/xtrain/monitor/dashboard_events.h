// The dashboard's server-sent event streams, without the HTTP part: each open page has a Cursor
// (byte offsets into every run's metrics.jsonl), and poll() returns the SSE text for whatever
// changed since — "reset" first, "runs" when the set of runs changes, "metrics" with new complete
// lines, "restart" when a file got shorter, and a comment line as a keep-alive when idle (5 s).
// Only runs whose files resolve inside the log folder are read (dashboard_files.h).
// Files are polled (every poll_seconds) rather than watched: portable, and cheap for a few runs.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace xtrain::monitor {

class EventStreams {
 public:
  struct Cursor {
    bool started = false;
    std::string run_names;  // the run list last sent, '\n'-joined
    std::map<std::string, int64_t> offsets;
    std::chrono::steady_clock::time_point last_sent{};
  };

  EventStreams(std::string logdir, double poll_seconds);
  // The SSE text to send now ("" when nothing changed and no keep-alive is due).
  std::string poll(Cursor& cursor) const;
  // Sleeps up to poll_seconds; false once stop() was called.
  bool wait();
  void stop();

 private:
  std::string logdir_;
  double poll_seconds_;
  bool stopping_ = false;
  std::mutex mu_;
  std::condition_variable wake_;
};

// "event: <name>\ndata: <data>\n\n"
std::string sse_event(const std::string& name, const std::string& data);

}  // namespace xtrain::monitor
