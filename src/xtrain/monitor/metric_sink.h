// The one small sink interface every monitor implements (DeepSpeed's monitor/ idea): scalars by
// name at a step, plus free-form events (text) for decisions and summaries. Sinks are owned by
// the trainer and only exist on the rank that writes metrics.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/monitor/histogram.h"

namespace xtrain::monitor {

class MetricSink {
 public:
  virtual ~MetricSink() = default;
  // Several scalars of one step at once ("train/loss" -> 2.31, "train/lr" -> 1e-3, …).
  virtual void write(int64_t step, const std::map<std::string, double>& scalars) = 0;
  // A text event: "sched/decision", "config", …
  virtual void write_text(int64_t step, const std::string& tag, const std::string& text) {}
  // A distribution (weights, gradients): only sinks that can show one implement it.
  virtual void write_histogram(int64_t step, const std::string& tag, const Histogram& histogram) {}
  virtual void flush() {}
};

// Fans out to several sinks.
class MultiSink : public MetricSink {
 public:
  void add(std::unique_ptr<MetricSink> sink) { sinks_.push_back(std::move(sink)); }
  void write(int64_t step, const std::map<std::string, double>& scalars) override {
    for (auto& s : sinks_) s->write(step, scalars);
  }
  void write_text(int64_t step, const std::string& tag, const std::string& text) override {
    for (auto& s : sinks_) s->write_text(step, tag, text);
  }
  void write_histogram(int64_t step, const std::string& tag, const Histogram& histogram) override {
    for (auto& s : sinks_) s->write_histogram(step, tag, histogram);
  }
  void flush() override {
    for (auto& s : sinks_) s->flush();
  }
  bool empty() const { return sinks_.empty(); }

 private:
  std::vector<std::unique_ptr<MetricSink>> sinks_;
};

}  // namespace xtrain::monitor
