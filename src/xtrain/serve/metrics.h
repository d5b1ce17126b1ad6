// The server's counters in Prometheus' text exposition format (version 0.0.4): requests by route
// and status code, errors, request latency and decode-step batch sizes as histograms, generated
// tokens (a counter, and a gauge of tokens/s over the last 10 s), queue length and active
// sequences. Thread-safe: HTTP threads and the scheduler thread update it.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace xtrain::serve {

class Metrics {
 public:
  void request(const std::string& route, int status, double seconds);
  void step(int64_t batch_size, int64_t tokens);  // one decoding step (batch_size 0: a prefill) and its new tokens
  void set_queue(int64_t waiting, int64_t active);
  std::string prometheus() const;

 private:
  struct Histogram {
    std::vector<double> bounds;
    std::vector<int64_t> counts;  // per bound, not cumulative; +1 for +Inf
    double sum = 0;
    int64_t n = 0;
    void observe(double v);
    void write(std::string& out, const std::string& name, const std::string& help) const;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  int64_t errors_ = 0, tokens_ = 0, steps_ = 0;
  Histogram latency_{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}, {}, 0, 0};
  Histogram batch_{{1, 2, 4, 8, 16, 32, 64, 128}, {}, 0, 0};
  int64_t waiting_ = 0, active_ = 0;
  mutable std::deque<std::pair<double, int64_t>> recent_;  // (time, tokens) of the last 10 s
};

}  // namespace xtrain::serve
