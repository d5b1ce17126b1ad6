// What a compression did, measured: deployable size (int8 weights with their scales, everything
// else float32), parameters, weight sparsity, validation loss / accuracy, and latency (median of
// timed forwards after a warm-up), before and after, printed as one table.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "xtrain/compress/graph/graph.h"

namespace xtrain::compress {

class QuantPlan;

struct ModelStats {
  std::string label;          // "fp32", "int8 static", ...
  int64_t bytes = 0;          // deployable weights
  int64_t parameters = 0;
  double sparsity = 0.0;      // zeros in Linear/Conv2d weights
  double loss = 0.0;
  double accuracy = -1.0;     // classification only
  double latency_ms = 0.0;    // one forward of the latency batch
};

// Bytes of every distinct tensor the graph reads for inference: float32 unless the plan has
// converted the layer (int8 weight + float32 per-channel scale + float32 bias; BatchNorm folded).
int64_t deploy_bytes(const Graph& graph, const QuantPlan* plan = nullptr);

// Median wall time of `repeats` calls (after 2 untimed ones), in milliseconds.
double median_latency_ms(const std::function<void()>& call, int64_t repeats);

// The table: one row per measurement, one column per stats entry, plus "after/before" ratios.
std::string format_summary(const std::vector<ModelStats>& stats, bool language_model);

}  // namespace xtrain::compress
