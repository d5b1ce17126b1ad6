// The tracer registry: a plugin's model class made of known layers traces once it registers a tracer
// (its graph, run by run_graph, equals the module's own forward), torch::nn::Linear traces as our
// Linear does, and a module type nobody registered is a UsageError naming the model, the type and
// the layer's path.
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>

#include "support/fixtures.h"
#include "xtrain/base/error.h"
#include "xtrain/compress/graph/executor.h"
#include "xtrain/compress/graph/trace.h"
#include "xtrain/nn/linear.h"

namespace xtrain::compress::trace_registry_test {
namespace {

// y = fc2(relu(fc1(x))) + x: a residual MLP block of known layers in a class of its own.
class ResidualMlpImpl : public torch::nn::Module {
 public:
  explicit ResidualMlpImpl(int64_t width) {
    fc1 = register_module("fc1", nn::Linear(width, 2 * width));
    act = register_module("act", torch::nn::ReLU());
    fc2 = register_module("fc2", nn::Linear(2 * width, width));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(act->forward(fc1->forward(x))) + x; }
  nn::Linear fc1{nullptr}, fc2{nullptr};
  torch::nn::ReLU act{nullptr};
};

class UnknownImpl : public torch::nn::Module {};

TEST(TraceRegistry, PluginModelOfKnownLayersTracesWithItsTracer) {
  register_tracer<ResidualMlpImpl>([](TraceContext& t, const std::string& path, const auto& m, int in) {
    const auto sub = [&](const char* name) { return path.empty() ? std::string(name) : path + "." + name; };
    int h = t.trace_module(sub("fc1"), t.child(*m, "fc1", path), in);
    h = t.trace_module(sub("act"), t.child(*m, "act", path), h);
    h = t.trace_module(sub("fc2"), t.child(*m, "fc2", path), h);
    return t.add(sub("residual"), h, in);
  });
  at::manual_seed(3);
  auto block = std::make_shared<ResidualMlpImpl>(8);
  TraceHints hints;
  hints.sample_shape = {8};
  hints.model = "mine";
  const Graph g = trace(*block, hints);
  EXPECT_EQ(g.model_type, "mine");
  EXPECT_EQ(g.input_kind, "features");
  at::NoGradGuard no_grad;
  const auto x = at::randn({5, 8});
  testing::expect_close(run_graph(g, x), block->forward(x), 1e-6, 1e-6, "residual MLP graph vs forward");
  const auto names = tracer_names();
  EXPECT_NE(std::find(names.begin(), names.end(), module_type_name(*block)), names.end());
}

TEST(TraceRegistry, TorchLinearLayersTraceLikeOurs) {
  at::manual_seed(4);
  torch::nn::Sequential seq(torch::nn::Linear(6, 5), torch::nn::ReLU(),
                            torch::nn::Linear(torch::nn::LinearOptions(5, 3).bias(false)));
  TraceHints hints;
  hints.sample_shape = {6};
  const Graph g = trace(*seq.ptr(), hints);
  EXPECT_EQ(g.model_type, "sequential");
  at::NoGradGuard no_grad;
  const auto x = at::randn({4, 6});
  testing::expect_close(run_graph(g, x), seq->forward(x), 1e-6, 1e-6, "torch::nn::Linear stack vs forward");
}

TEST(TraceRegistry, AnUnregisteredModuleNamesTheModelTypeAndPath) {
  UnknownImpl m;
  TraceHints hints;
  hints.model = "mine";
  try {
    trace(m, hints);
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("compress/export: model mine: module " + module_type_name(m) + " at layer '<root>' is not traceable (register a "
                       "tracer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("xtrain::nn::LinearImpl"), std::string::npos) << msg;  // the traceable types are listed
  }
}

}  // namespace
}  // namespace xtrain::compress::trace_registry_test
