// Which layers are quantised and how, and their state through the stages of quantisation:
// float → calibrating (observers watch each layer's input) → fake-quant (QAT: the forward sees
// quantised values, gradients pass straight through) → converted (int8 layers, int8_layers.h).
// Weights are int8 per output channel, activations uint8 per tensor; embeddings (GPT) are
// quantised weight-only per row. The executor (graph/executor.h) reads this plan per node.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "xtrain/compress/graph/graph.h"
#include "xtrain/compress/options.h"
#include "xtrain/compress/quant/int8_layers.h"
#include "xtrain/compress/quant/observer.h"
#include "xtrain/compress/quant/qparams.h"

namespace xtrain::compress {

enum class QuantStage { kFloat, kCalibrating, kFakeQuant, kConverted };

struct LayerQuant {
  bool enabled = false;
  bool dynamic = false;
  std::unique_ptr<Observer> observer;  // calibrating: the configured one; fake-quant: moving average
  AffineQParams act;                   // the input's qparams (static, after calibration)
  std::shared_ptr<Int8Linear> linear;  // converted
  std::shared_ptr<Int8Conv2d> conv;
  PerChannelInt8 table, positions;     // converted embedding (weight-only, per row)
  at::Tensor table_f32, positions_f32; // ... dequantised for the gather
};

class QuantPlan {
 public:
  QuantPlan(const Graph& graph, const QuantOptions& options);
  const QuantOptions& options() const { return options_; }
  QuantStage stage() const { return stage_; }
  LayerQuant& at(size_t node) { return layers_[node]; }
  const LayerQuant& at(size_t node) const { return layers_[node]; }
  int64_t num_enabled() const;

  void start_calibration();
  // Calibrated ranges -> activation qparams (static mode). UsageError if a layer saw no data.
  void finish_calibration(const Graph& graph);
  // Fake quantisation from the calibrated ranges on (moving-average observers continue them).
  void start_qat();
  // int8 layers from the current weights (BatchNorm folded) and the activation qparams.
  void convert(const Graph& graph);

 private:
  QuantOptions options_;
  QuantStage stage_ = QuantStage::kFloat;
  std::vector<LayerQuant> layers_;
};

}  // namespace xtrain::compress
