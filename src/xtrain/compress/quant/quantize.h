// Post-training quantisation and QAT as steps on a model: wrap() traces it and returns a model
// whose forward runs the graph through a QuantPlan (same module, same parameters, so the engine
// can fine-tune it), calibrate() feeds batches to the observers, qat() switches on fake
// quantisation, convert() builds the int8 layers. PTQ = wrap → calibrate → convert;
// QAT = wrap → calibrate → qat → fine-tune (engine) → convert; dynamic = wrap → convert.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

#include "xtrain/compress/graph/graph.h"
#include "xtrain/compress/graph/trace.h"
#include "xtrain/compress/quant/quant_plan.h"
#include "xtrain/models/factory.h"

namespace xtrain::compress {

struct QuantizedModel {
  std::shared_ptr<Graph> graph;
  std::shared_ptr<QuantPlan> plan;
  models::Model model;  // module: the original; forward: the graph through the plan
};

QuantizedModel wrap(const models::Model& base, const QuantOptions& options, const TraceHints& hints = {});
// `input(i)` returns the i-th calibration batch's input (float images or int64 tokens).
void calibrate(QuantizedModel& q, const std::function<at::Tensor(int64_t)>& input, int64_t batches);
void qat(QuantizedModel& q);
void convert(QuantizedModel& q);

}  // namespace xtrain::compress
