// trace(): reads the layer graph (graph.h) off a module tree by asking a registry keyed by each
// module's C++ type: the assemblies in models/ (GPT, ResNet-18, MlpClassifier, Vit), torch::nn::Sequential
// stacks, and these layers: nn::Linear and torch::nn::Linear, nn::LayerNorm, nn::Block, nn::Mlp,
// nn::CausalSelfAttention, nn::MultiScaleAttention, nn::GridAttention, models::VitBlock and VitMlp,
// torch::nn::Conv2d (+ a following BatchNorm2d), ReLU, GELU(tanh), Flatten, Dropout. A plugin's module class made of these registers a tracer that
// walks its children in forward order; any other module is a UsageError naming the module's type
// and path. Design choice: children are found by their registered names (what checkpoints use
// too), not by C++ members, so a model keeps its layout.
#pragma once
#include <c10/util/Type.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/compress/graph/graph.h"

namespace xtrain::compress {

struct TraceHints {
  std::vector<int64_t> sample_shape;  // image / feature input: one sample's shape, e.g. {1, 28, 28}
  int64_t heads = 0;     // a standalone attention or Block: its NH (a GPT knows its own)
  int64_t seq_len = 0;   // ... and its longest T
  double dropout = 0.0;  // MlpClassifier keeps its dropout private: pass the config's
  std::string model;     // xtrain.model.type, for messages ("" = the root module's type)
};

Graph trace(const torch::nn::Module& root, const TraceHints& hints = {});

// What a registered tracer works with: it traces its module's children (or any traceable module)
// in the order its forward runs them, joining values with the elementwise ops below.
class TraceContext {
 public:
  virtual ~TraceContext() = default;
  // Traces `module` (any registered type) at `path` reading value `input`; returns its output value.
  virtual int trace_module(const std::string& path, const std::shared_ptr<torch::nn::Module>& module, int input) = 0;
  // The child registered as `name` under `module` (UsageError naming `path` when it has none).
  virtual std::shared_ptr<torch::nn::Module> child(const torch::nn::Module& module, const std::string& name,
                                                   const std::string& path) = 0;
  virtual int add(const std::string& name, int a, int b) = 0;  // elementwise a + b (a residual)
  virtual int relu(const std::string& name, int input) = 0;
  virtual const TraceHints& hints() const = 0;
};

// Appends `module`'s nodes reading value `input` (0: the graph input) and returns its output value.
using ModuleTracer = std::function<int(TraceContext& ctx, const std::string& path,
                                       const std::shared_ptr<torch::nn::Module>& module, int input)>;

// Registers the tracer of modules whose C++ type is `module_type` (module_type_name), replacing one
// registered before. For a plugin model: register_tracer<MyModelImpl>(...) with the same library.
void register_tracer(const std::string& module_type, ModuleTracer tracer);
template <class ModuleImpl>
void register_tracer(ModuleTracer tracer) {
  register_tracer(c10::demangle_type<ModuleImpl>(), std::move(tracer));
}
// The demangled dynamic C++ type of `module` ("xtrain::nn::LinearImpl"): the registry's key.
std::string module_type_name(const torch::nn::Module& module);
// Every traceable module type.
std::vector<std::string> tracer_names();

// The module under `path` ("layer1.0.conv1"), or UsageError naming the path.
std::shared_ptr<torch::nn::Module> find_module(const torch::nn::Module& root, const std::string& path);

}  // namespace xtrain::compress
