// What the optimizer-step benchmarks share (fused_adamw.cpp, adam8bit_step.cpp): the median of
// timed repetitions, comma-separated size/thread lists, and the AdamW options both time.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "xtrain/optim/options.h"

namespace xtrain::bench {

// Median wall time of `reps` calls of f, in ms, after `warmup` untimed calls.
template <class F>
double median_ms(F&& f, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// "10000000,50000000" -> {10000000, 50000000}.
inline std::vector<int64_t> parse_list(const char* text) {
  std::vector<int64_t> out;
  std::stringstream s(text);
  for (std::string item; std::getline(s, item, ',');) out.push_back(std::stoll(item));
  return out;
}

// AdamW, lr 1e-3, weight decay 0.1, moments kept as `state_dtype` ("fp32" or "int8").
inline optim::OptimizerOptions adamw_options(const std::string& state_dtype = "fp32") {
  optim::OptimizerOptions o;
  o.type = "AdamW";
  o.adam.lr = 1e-3;
  o.adam.weight_decay = 0.1;
  o.adam.state_dtype = state_dtype;
  return o;
}

}  // namespace xtrain::bench
