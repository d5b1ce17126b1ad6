// TensorBoard event files written by our own writer: TFRecord framing (length, masked CRC32C of
// the length, payload, masked CRC32C of the payload) around hand-encoded Event protos; the first
// record is file_version "brain.Event:2". Scalars as simple_value, histograms as HistogramProto,
// text as a string tensor with the "text" plugin's metadata (rendered verbatim as a code block).
// Flushing: a background thread flushes every `flush_secs` when something is pending, writes flush
// after `max_pending` records, and the destructor flushes, so a crash loses at most one interval.
#pragma once
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "xtrain/monitor/metric_sink.h"

namespace xtrain::monitor {

// One events.out.tfevents.<unix time>.<hostname> file in `dir` (created if missing; ".<n>" is
// appended when a file of that name exists already).
class EventFileWriter {
 public:
  explicit EventFileWriter(const std::string& dir, double flush_secs = 10.0, int max_pending = 10);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // Frames and writes one serialized Event.
  void write_record(const std::string& event);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void flush_locked();
  void flusher_loop();

  std::string path_;
  std::FILE* file_ = nullptr;
  double flush_secs_;
  int max_pending_;
  int pending_ = 0;
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable wake_;
  std::thread flusher_;
};

class TensorBoardSink : public MetricSink {
 public:
  explicit TensorBoardSink(const std::string& dir, double flush_secs = 10.0);
  void write(int64_t step, const std::map<std::string, double>& scalars) override;
  void write_text(int64_t step, const std::string& tag, const std::string& text) override;
  void write_histogram(int64_t step, const std::string& tag, const Histogram& histogram) override;
  void flush() override { writer_.flush(); }
  const std::string& path() const { return writer_.path(); }

 private:
  EventFileWriter writer_;
};

}  // namespace xtrain::monitor
