// Runs a traced Graph: in float32 with the module's own tensors (equal to the module's forward),
// or through a QuantPlan: observing layer inputs (calibration), fake-quantised with straight-through
// gradients (QAT: autograd reaches the module's parameters), or on the int8 layers (inference).
// Design choice: one interpreter for every mode, so the calibrated, trained and deployed models
// are the same graph and cannot drift apart.
#pragma once
#include <ATen/core/Tensor.h>

#include "xtrain/compress/graph/graph.h"

namespace xtrain::compress {

class QuantPlan;

// `training`: dropout on, BatchNorm in training mode (float), QAT observers updated.
at::Tensor run_graph(const Graph& graph, const at::Tensor& input, QuantPlan* plan = nullptr, bool training = false);

}  // namespace xtrain::compress
