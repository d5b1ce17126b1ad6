// Field numbers from tensorflow/core/util/event.proto, framework/summary.proto, tensor.proto and
// tensor_shape.proto (see tests/monitor/tfevents.proto, the subset the test decodes with).
#include "xtrain/monitor/tensorboard_sink.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/monitor/crc32c.h"
#include "xtrain/monitor/proto_writer.h"

namespace xtrain::monitor {
namespace fs = std::filesystem;
namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// Event { wall_time = 1; step = 2; summary = 5 { value = 1 } }
std::string summary_event(int64_t step, const ProtoWriter& value) {
  ProtoWriter summary;
  summary.message_field(1, value);
  ProtoWriter event;
  event.double_field(1, unix_seconds());
  event.int64_field(2, step);
  event.message_field(5, summary);
  return event.bytes();
}

// Markdown code block: our text events are logs and JSON, meant to be read verbatim.
std::string as_code_block(const std::string& text) {
  std::string out = "    ";
  for (char c : text) {
    out += c;
    if (c == '\n') out += "    ";
  }
  return out;
}

}  // namespace

EventFileWriter::EventFileWriter(const std::string& dir, double flush_secs, int max_pending)
    : flush_secs_(flush_secs), max_pending_(max_pending) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  XTRAIN_USAGE_CHECK(!ec, "monitor: cannot create the TensorBoard folder ", dir, ": ", ec.message(),
                     " (tensorboard.output_path)");
  const auto now = static_cast<long long>(unix_seconds());
  const std::string base = (fs::path(dir) / c10::str("events.out.tfevents.", now, ".", hostname())).string();
  path_ = base;
  for (int n = 1; (file_ = std::fopen(path_.c_str(), "wbx")) == nullptr && n < 1000; ++n) {
    path_ = base + "." + std::to_string(n);
  }
  XTRAIN_USAGE_CHECK(file_ != nullptr, "monitor: cannot create ", base, " (tensorboard.output_path)");
  ProtoWriter version;  // Event { wall_time = 1; file_version = 3 }
  version.double_field(1, unix_seconds());
  version.bytes_field(3, "brain.Event:2");
  write_record(version.bytes());
  flush();
  flusher_ = std::thread([this] { flusher_loop(); });
}

EventFileWriter::~EventFileWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  std::fclose(file_);
}

void EventFileWriter::write_record(const std::string& event) {
  const uint64_t length = event.size();  // little-endian on every host we build for
  const uint32_t length_crc = masked_crc32c(&length, sizeof length);
  const uint32_t data_crc = masked_crc32c(event.data(), event.size());
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(&length, sizeof length, 1, file_);
  std::fwrite(&length_crc, sizeof length_crc, 1, file_);
  std::fwrite(event.data(), 1, event.size(), file_);
  std::fwrite(&data_crc, sizeof data_crc, 1, file_);
  if (++pending_ >= max_pending_) flush_locked();
}

void EventFileWriter::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  flush_locked();
}

void EventFileWriter::flush_locked() {
  std::fflush(file_);
  pending_ = 0;
}

void EventFileWriter::flusher_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::duration<double>(flush_secs_), [this] { return stop_; });
    if (pending_ > 0) flush_locked();
  }
  flush_locked();
}

TensorBoardSink::TensorBoardSink(const std::string& dir, double flush_secs) : writer_(dir, flush_secs) {}

void TensorBoardSink::write(int64_t step, const std::map<std::string, double>& scalars) {
  for (const auto& [tag, v] : scalars) {
    ProtoWriter value;  // Summary.Value { tag = 1; simple_value = 2 }
    value.bytes_field(1, tag);
    value.float_field(2, static_cast<float>(v));
    writer_.write_record(summary_event(step, value));
  }
}

void TensorBoardSink::write_text(int64_t step, const std::string& tag, const std::string& text) {
  ProtoWriter plugin;  // PluginData { plugin_name = 1 }
  plugin.bytes_field(1, "text");
  ProtoWriter metadata;  // SummaryMetadata { plugin_data = 1 }
  metadata.message_field(1, plugin);
  ProtoWriter shape;  // TensorShapeProto with no dim: a scalar
  ProtoWriter tensor;  // TensorProto { dtype = 1 (DT_STRING = 7); tensor_shape = 2; string_val = 8 }
  tensor.varint_field(1, 7);
  tensor.message_field(2, shape);
  tensor.bytes_field(8, as_code_block(text));
  ProtoWriter value;  // Summary.Value { tag = 1; tensor = 8; metadata = 9 }
  value.bytes_field(1, tag);
  value.message_field(8, tensor);
  value.message_field(9, metadata);
  writer_.write_record(summary_event(step, value));
}

void TensorBoardSink::write_histogram(int64_t step, const std::string& tag, const Histogram& h) {
  ProtoWriter histo;  // HistogramProto { min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7 }
  histo.double_field(1, h.min);
  histo.double_field(2, h.max);
  histo.double_field(3, h.num);
  histo.double_field(4, h.sum);
  histo.double_field(5, h.sum_squares);
  histo.packed_doubles_field(6, h.bucket_limit);
  histo.packed_doubles_field(7, h.bucket);
  ProtoWriter value;  // Summary.Value { tag = 1; histo = 5 }
  value.bytes_field(1, tag);
  value.message_field(5, histo);
  writer_.write_record(summary_event(step, value));
}

}  // namespace xtrain::monitor
