// metrics.jsonl: one JSON object per write, {"step": n, "time": unix seconds, name: value, …};
// text events as {"step": n, "time": t, "event": tag, "text": …}. Appends, so a resumed run
// continues the same file; flushed on every write (a crash loses nothing already written).
#pragma once
#include <cstdio>
#include <string>

#include "xtrain/monitor/metric_sink.h"

namespace xtrain::monitor {

class JsonlSink : public MetricSink {
 public:
  explicit JsonlSink(const std::string& path);
  ~JsonlSink() override;
  void write(int64_t step, const std::map<std::string, double>& scalars) override;
  void write_text(int64_t step, const std::string& tag, const std::string& text) override;
  void flush() override;

 private:
  std::FILE* file_ = nullptr;
};

}  // namespace xtrain::monitor
