// wrap / calibrate / qat / convert.
#include "xtrain/compress/quant/quantize.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include "xtrain/base/error.h"
#include "xtrain/compress/graph/executor.h"

namespace xtrain::compress {

QuantizedModel wrap(const models::Model& base, const QuantOptions& options, const TraceHints& hints) {
  QuantizedModel q;
  q.graph = std::make_shared<Graph>(trace(*base.module, hints));
  q.plan = std::make_shared<QuantPlan>(*q.graph, options);
  XTRAIN_USAGE_CHECK(q.plan->num_enabled() > 0, "compress: quantization selects no layer of this model");
  auto graph = q.graph;
  auto plan = q.plan;
  auto module = base.module;
  q.model = {base.module,
             [graph, plan, module](const at::Tensor& x) { return run_graph(*graph, x, plan.get(), module->is_training()); },
             base.task};
  return q;
}

void calibrate(QuantizedModel& q, const std::function<at::Tensor(int64_t)>& input, int64_t batches) {
  at::NoGradGuard no_grad;
  const bool was_training = q.model.module->is_training();
  q.model.module->eval();
  q.plan->start_calibration();
  for (int64_t i = 0; i < batches; ++i) run_graph(*q.graph, input(i), q.plan.get(), false);
  q.plan->finish_calibration(*q.graph);
  q.model.module->train(was_training);
}

void qat(QuantizedModel& q) { q.plan->start_qat(); }

void convert(QuantizedModel& q) { q.plan->convert(*q.graph); }

}  // namespace xtrain::compress
