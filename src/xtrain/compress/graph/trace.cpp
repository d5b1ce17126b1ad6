// The tracer: one function per assembly and per layer kind, each appending nodes in the order the
// module's forward runs them (checked by tests/compress/graph_test.cpp: graph output == forward).
#include "xtrain/compress/graph/trace.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "xtrain/base/error.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/mlp_classifier.h"
#include "xtrain/models/resnet.h"
#include "xtrain/nn/block.h"
#include "xtrain/nn/causal_self_attention.h"
#include "xtrain/nn/layer_norm.h"
#include "xtrain/nn/linear.h"
#include "xtrain/nn/mlp.h"
#include "xtrain/nn/multiscale_attention.h"

namespace xtrain::compress {

using ModulePtr = std::shared_ptr<torch::nn::Module>;

namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

[[noreturn]] void unsupported(const std::string& path, const torch::nn::Module& m) {
  XTRAIN_USAGE_ERROR("compress/export: layer '", path.empty() ? "<root>" : path, "' (", m.name(),
                     ") is not supported. Known layers: Linear, Conv2d, BatchNorm2d after a Conv2d, ReLU, GELU(tanh), "
                     "LayerNorm, Flatten, Dropout, CausalSelfAttention, MultiScaleAttention, Block, Mlp; models: gpt, "
                     "resnet18, mlp, Sequential stacks of known layers");
}

ModulePtr child(const torch::nn::Module& m, const std::string& name, const std::string& path, bool required = true) {
  for (const auto& c : m.named_children()) {
    if (c.key() == name) return c.value();
  }
  XTRAIN_USAGE_CHECK(!required, "compress/export: layer '", path, "' (", m.name(), ") has no child '", name, "'");
  return nullptr;
}

template <class T>
T* as(const ModulePtr& m) {
  return m ? dynamic_cast<T*>(m.get()) : nullptr;
}

// Whether an attention module is causal: position 0's output must not change with position 1.
bool probe_causal(torch::nn::Module& attn, int64_t C) {
  at::NoGradGuard no_grad;
  const bool was_training = attn.is_training();
  attn.eval();
  auto* ms = dynamic_cast<nn::MultiScaleAttentionImpl*>(&attn);
  const auto x = at::randn({1, 2, C}, ms->qkv->weight.options());
  auto x2 = x.clone();
  x2.select(1, 1).add_(1.0);
  const bool causal = at::allclose(ms->forward(x).select(1, 0), ms->forward(x2).select(1, 0));
  attn.train(was_training);
  return causal;
}

class Tracer {
 public:
  explicit Tracer(const TraceHints& hints) : hints_(hints) {}

  Graph graph;

  int add(Node n) {
    n.output = graph.num_values++;
    graph.nodes.push_back(std::move(n));
    return graph.nodes.back().output;
  }
  int simple(OpKind kind, const std::string& name, std::vector<int> inputs, double p = 0.0) {
    Node n;
    n.kind = kind, n.name = name, n.inputs = std::move(inputs), n.p = p;
    n.op_type = op_name(kind);
    return add(std::move(n));
  }
  int dropout(const std::string& name, int in, double p) { return p > 0 ? simple(OpKind::kDropout, name, {in}, p) : in; }

  int linear(const std::string& name, const ModulePtr& m, int in, bool relu = false) {
    auto* l = as<nn::LinearImpl>(m);
    if (l == nullptr) unsupported(name, *m);
    Node n;
    n.kind = OpKind::kLinear, n.op_type = "Linear", n.name = name, n.inputs = {in};
    n.weight = l->weight, n.bias = l->bias, n.relu = relu;
    return add(std::move(n));
  }

  int conv(const std::string& name, const ModulePtr& m, int in) {
    auto* c = as<torch::nn::Conv2dImpl>(m);
    if (c == nullptr) unsupported(name, *m);
    const auto& o = c->options;
    const auto* pad = c10::get_if<torch::ExpandingArray<2>>(&o.padding());
    XTRAIN_USAGE_CHECK(pad != nullptr && o.groups() == 1 && (*o.dilation())[0] == 1 && (*o.dilation())[1] == 1 &&
                           c10::holds_alternative<torch::enumtype::kZeros>(o.padding_mode()),
                       "compress/export: conv '", name, "': only groups=1, dilation 1, explicit zero padding");
    Node n;
    n.kind = OpKind::kConv2d, n.op_type = "Conv2d", n.name = name, n.inputs = {in};
    n.weight = c->weight, n.bias = c->bias;
    for (int i = 0; i < 2; ++i) n.stride[i] = (*o.stride())[i], n.padding[i] = (**pad)[i];
    return add(std::move(n));
  }

  // Folds a BatchNorm2d into the conv node that produced `in` (the node just added).
  int batch_norm(const std::string& name, const ModulePtr& m, int in) {
    auto* bn = as<torch::nn::BatchNorm2dImpl>(m);
    Node* prev = graph.nodes.empty() ? nullptr : &graph.nodes.back();
    if (bn == nullptr || prev == nullptr || prev->kind != OpKind::kConv2d || prev->output != in ||
        prev->bn_weight.defined() || prev->relu) {
      unsupported(name, *m);
    }
    XTRAIN_USAGE_CHECK(bn->options.affine() && bn->options.track_running_stats(), "compress/export: batch norm '",
                       name, "' needs affine=true and running statistics");
    prev->bn_weight = bn->weight, prev->bn_bias = bn->bias, prev->bn_mean = bn->running_mean;
    prev->bn_var = bn->running_var, prev->eps = bn->options.eps(), prev->bn_module = m;
    return in;
  }

  int relu(const std::string& name, int in) {
    Node* prev = graph.nodes.empty() ? nullptr : &graph.nodes.back();
    if (prev != nullptr && prev->output == in && (prev->kind == OpKind::kLinear || prev->kind == OpKind::kConv2d) &&
        !prev->relu) {
      prev->relu = true;
      return in;
    }
    return simple(OpKind::kRelu, name, {in});
  }

  int layer_norm(const std::string& name, const ModulePtr& m, int in) {
    auto* ln = as<nn::LayerNormImpl>(m);
    if (ln == nullptr) unsupported(name, *m);
    Node n;
    n.kind = OpKind::kLayerNorm, n.op_type = "LayerNorm", n.name = name, n.inputs = {in};
    n.weight = ln->weight, n.bias = ln->bias, n.eps = 1e-5;  // nn::LayerNorm's eps (the models' default)
    return add(std::move(n));
  }

  int attention(const std::string& prefix, const ModulePtr& m, int in, int64_t heads, int64_t max_T, double p) {
    Node n;
    n.kind = OpKind::kAttention, n.op_type = "Attention", n.name = join(prefix, "attention");
    if (as<nn::CausalSelfAttentionImpl>(m) != nullptr) {
      n.causal = true;
    } else if (auto* ms = as<nn::MultiScaleAttentionImpl>(m)) {
      n.windows = ms->windows();
      n.causal = probe_causal(*m, ms->qkv->weight.size(1));
    } else {
      unsupported(prefix, *m);
    }
    XTRAIN_USAGE_CHECK(heads > 0, "compress/export: attention '", prefix, "' needs its head count (TraceHints.heads)");
    n.heads = heads, n.max_T = max_T;
    const int qkv = linear(join(prefix, "qkv"), child(*m, "qkv", prefix), in);
    n.inputs = {qkv};
    const int y = add(std::move(n));
    return dropout(join(prefix, "dropout"), linear(join(prefix, "proj"), child(*m, "proj", prefix), y), p);
  }

  int ffn(const std::string& prefix, const ModulePtr& m, int in, double p) {
    if (as<nn::MlpImpl>(m) == nullptr) unsupported(prefix, *m);
    const int h = linear(join(prefix, "fc"), child(*m, "fc", prefix), in);
    const int g = simple(OpKind::kGeluTanh, join(prefix, "gelu"), {h});
    return dropout(join(prefix, "dropout"), linear(join(prefix, "proj"), child(*m, "proj", prefix), g), p);
  }

  int block(const std::string& prefix, const ModulePtr& m, int in, int64_t heads, int64_t max_T, double p) {
    if (as<nn::BlockImpl>(m) == nullptr) unsupported(prefix, *m);
    const int a = layer_norm(join(prefix, "ln1"), child(*m, "ln1", prefix), in);
    const int h = simple(OpKind::kAdd, join(prefix, "add1"),
                         {attention(join(prefix, "attn"), child(*m, "attn", prefix), a, heads, max_T, p), in});
    const int b = layer_norm(join(prefix, "ln2"), child(*m, "ln2", prefix), h);
    return simple(OpKind::kAdd, join(prefix, "add2"), {ffn(join(prefix, "mlp"), child(*m, "mlp", prefix), b, p), h});
  }

  void gpt(const models::GPTImpl& g) {
    const auto& o = g.options();
    graph.model_type = "gpt", graph.input_kind = "tokens", graph.sample_shape = {o.seq_len};
    Node e;
    e.kind = OpKind::kEmbedTokens, e.op_type = "Embedding", e.name = "wte", e.inputs = {0};
    e.weight = g.wte->weight, e.aux = g.wpe->weight;
    int x = dropout("drop", add(std::move(e)), o.dropout);
    const auto& blocks = *g.blocks;
    for (size_t i = 0; i < blocks.size(); ++i) {
      x = block("blocks." + std::to_string(i), blocks.ptr(i), x, o.heads, o.seq_len, o.dropout);
    }
    x = layer_norm("ln_f", child(g, "ln_f", ""), x);
    Node head;
    head.kind = OpKind::kLinear, head.op_type = "Linear", head.name = "lm_head", head.inputs = {x};
    head.weight = g.lm_head ? g.lm_head->weight : g.wte->weight;  // tied: the embedding itself
    graph.output = add(std::move(head));
  }

  int basic_block(const std::string& prefix, const ModulePtr& m, int in) {
    if (!child(*m, "conv1", prefix, false) || !child(*m, "bn2", prefix, false)) unsupported(prefix, *m);
    int h = batch_norm(join(prefix, "bn1"), child(*m, "bn1", prefix), conv(join(prefix, "conv1"), child(*m, "conv1", prefix), in));
    h = relu(join(prefix, "relu1"), h);
    h = batch_norm(join(prefix, "bn2"), child(*m, "bn2", prefix), conv(join(prefix, "conv2"), child(*m, "conv2", prefix), h));
    int shortcut = in;
    if (auto ds = child(*m, "downsample", prefix, false)) {
      const std::string d = join(prefix, "downsample");
      shortcut = batch_norm(d + ".1", child(*ds, "1", d), conv(d + ".0", child(*ds, "0", d), in));
    }
    return simple(OpKind::kRelu, join(prefix, "relu"), {simple(OpKind::kAdd, join(prefix, "add"), {h, shortcut})});
  }

  void resnet(const models::ResNet18Impl& r) {
    graph.model_type = "resnet18", graph.input_kind = "image";
    int x = batch_norm("bn1", child(r, "bn1", ""), conv("conv1", child(r, "conv1", ""), 0));
    x = relu("relu", x);
    for (int l = 1; l <= 4; ++l) {
      const std::string name = "layer" + std::to_string(l);
      for (const auto& b : child(r, name, "")->named_children()) x = basic_block(join(name, b.key()), b.value(), x);
    }
    graph.output = linear("fc", child(r, "fc", ""), simple(OpKind::kMeanHW, "avgpool", {x}));
  }

  void mlp(const models::MlpClassifierImpl& m) {
    graph.model_type = "mlp", graph.input_kind = "features";
    int x = simple(OpKind::kFlatten, "flatten", {0});
    for (const auto& h : child(m, "hidden", "")->named_children()) {
      x = dropout("hidden." + h.key() + ".dropout", linear("hidden." + h.key(), h.value(), x, /*relu=*/true),
                  hints_.dropout);
    }
    graph.output = linear("head", child(m, "head", ""), x);
  }

  // One entry of a Sequential (or a standalone layer).
  int layer(const std::string& path, const ModulePtr& m, int in) {
    if (as<nn::LinearImpl>(m)) return linear(path, m, in);
    if (as<torch::nn::Conv2dImpl>(m)) return conv(path, m, in);
    if (as<torch::nn::BatchNorm2dImpl>(m)) return batch_norm(path, m, in);
    if (as<torch::nn::ReLUImpl>(m)) return relu(path, in);
    if (auto* g = as<torch::nn::GELUImpl>(m)) {
      if (g->options.approximate() != "tanh") unsupported(path, *m);
      return simple(OpKind::kGeluTanh, path, {in});
    }
    if (as<torch::nn::FlattenImpl>(m)) return simple(OpKind::kFlatten, path, {in});
    if (auto* d = as<torch::nn::DropoutImpl>(m)) return dropout(path, in, d->options.p());
    if (as<nn::LayerNormImpl>(m)) return layer_norm(path, m, in);
    if (as<nn::MlpImpl>(m)) return ffn(path, m, in, 0.0);
    if (as<nn::BlockImpl>(m)) return block(path, m, in, hints_.heads, hints_.seq_len, 0.0);
    if (as<nn::CausalSelfAttentionImpl>(m) || as<nn::MultiScaleAttentionImpl>(m)) {
      return attention(path, m, in, hints_.heads, hints_.seq_len, 0.0);
    }
    if (auto* seq = as<torch::nn::SequentialImpl>(m)) {
      for (const auto& c : seq->named_children()) in = layer(join(path, c.key()), c.value(), in);
      return in;
    }
    unsupported(path, *m);
  }

 private:
  TraceHints hints_;
};

}  // namespace

Graph trace(const torch::nn::Module& root, const TraceHints& hints) {
  Tracer t(hints);
  if (auto* g = dynamic_cast<const models::GPTImpl*>(&root)) {
    t.gpt(*g);
  } else if (auto* r = dynamic_cast<const models::ResNet18Impl*>(&root)) {
    t.resnet(*r);
  } else if (auto* m = dynamic_cast<const models::MlpClassifierImpl*>(&root)) {
    t.mlp(*m);
  } else {
    // A Sequential or a single known layer: the tracer needs a shared_ptr; clone-free aliasing.
    ModulePtr alias(ModulePtr(), const_cast<torch::nn::Module*>(&root));
    t.graph.model_type = dynamic_cast<const torch::nn::SequentialImpl*>(&root) ? "sequential" : "layer";
    t.graph.input_kind = "features";
    t.graph.output = t.layer("", alias, 0);
  }
  Graph g = std::move(t.graph);
  if (g.input_kind != "tokens") g.sample_shape = hints.sample_shape;
  if (g.input_kind == "tokens" && !hints.sample_shape.empty()) g.sample_shape = hints.sample_shape;
  return g;
}

std::shared_ptr<torch::nn::Module> find_module(const torch::nn::Module& root, const std::string& path) {
  for (const auto& m : root.named_modules("", /*include_self=*/false)) {
    if (m.key() == path) return m.value();
  }
  XTRAIN_USAGE_ERROR("compress: the model has no layer '", path, "'");
}

}  // namespace xtrain::compress
