// The files of a compressed model (<run>/compressed/ by default): model.pt, every parameter and
// buffer by name with its own shape (structured pruning changes shapes, so a module built from the
// config is resized on load), and quant.json, the quantisation mode and each quantised layer's
// activation scale and zero point (the int8 weights are re-derived from model.pt exactly: the
// per-channel quantisation is deterministic). model.pt is a pickled dict: torch.load reads it.
#pragma once
#include <string>

#include "xtrain/compress/graph/graph.h"

namespace torch::nn {
class Module;
}

namespace xtrain::compress {

class QuantPlan;
struct QuantOptions;

void save_state(const torch::nn::Module& module, const std::string& path);
// Copies each tensor in (resizing parameters and buffers whose shape differs, and updating
// Conv2d/BatchNorm2d options to match). UsageError naming a missing or unexpected tensor.
void load_state(torch::nn::Module& module, const std::string& path);

std::string quant_plan_json(const Graph& graph, const QuantPlan& plan);
// The options (mode, op selection) and activation qparams saved by quant_plan_json.
QuantOptions quant_options_from_json(const std::string& text);
// Sets each saved layer's activation qparams in `plan` (built from the same options), then converts.
void restore_quant_plan(const Graph& graph, QuantPlan& plan, const std::string& text);

}  // namespace xtrain::compress
