// The tracer: one function per assembly and per layer kind, each appending nodes in the order the
// module's forward runs them (checked by tests/compress/graph_test.cpp: graph output == forward),
// found through a registry keyed by the module's C++ type (built-ins added on first use).
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
#include "xtrain/base/registry.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/mlp_classifier.h"
#include "xtrain/models/resnet.h"
#include "xtrain/models/vit.h"
#include "xtrain/nn/block.h"
#include "xtrain/nn/causal_self_attention.h"
#include "xtrain/nn/grid_attention.h"
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
                     "LayerNorm, Flatten, Dropout, CausalSelfAttention, MultiScaleAttention, GridAttention, Block, Mlp, "
                     "VitBlock, VitMlp; models: gpt, resnet18, mlp, vit, Sequential stacks of known layers");
}

ModulePtr child_of(const torch::nn::Module& m, const std::string& name, const std::string& path, bool required = true) {
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

std::string traceable_list();
const ModuleTracer* find_tracer(const std::string& type);

class Tracer : public TraceContext {
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

  // nn::Linear or torch::nn::Linear (a plugin's layers): the same y = x·Wᵀ + b.
  int linear(const std::string& name, const ModulePtr& m, int in, bool relu = false) {
    Node n;
    if (auto* l = as<nn::LinearImpl>(m)) {
      n.weight = l->weight, n.bias = l->bias;
    } else if (auto* t = as<torch::nn::LinearImpl>(m)) {
      n.weight = t->weight, n.bias = t->bias;
    } else {
      unsupported(name, *m);
    }
    n.kind = OpKind::kLinear, n.op_type = "Linear", n.name = name, n.inputs = {in}, n.relu = relu;
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

  int relu(const std::string& name, int in) override {
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
    const int qkv = linear(join(prefix, "qkv"), child_of(*m, "qkv", prefix), in);
    n.inputs = {qkv};
    const int y = add(std::move(n));
    return dropout(join(prefix, "dropout"), linear(join(prefix, "proj"), child_of(*m, "proj", prefix), y), p);
  }

  // nn::Mlp or the ViT's VitMlp: fc, GELU(tanh), proj.
  int ffn(const std::string& prefix, const ModulePtr& m, int in, double p) {
    if (as<nn::MlpImpl>(m) == nullptr && as<models::VitMlpImpl>(m) == nullptr) unsupported(prefix, *m);
    const int h = linear(join(prefix, "fc"), child_of(*m, "fc", prefix), in);
    const int g = simple(OpKind::kGeluTanh, join(prefix, "gelu"), {h});
    return dropout(join(prefix, "dropout"), linear(join(prefix, "proj"), child_of(*m, "proj", prefix), g), p);
  }

  int block(const std::string& prefix, const ModulePtr& m, int in, int64_t heads, int64_t max_T, double p) {
    if (as<nn::BlockImpl>(m) == nullptr) unsupported(prefix, *m);
    const int a = layer_norm(join(prefix, "ln1"), child_of(*m, "ln1", prefix), in);
    const int h = simple(OpKind::kAdd, join(prefix, "add1"),
                         {attention(join(prefix, "attn"), child_of(*m, "attn", prefix), a, heads, max_T, p), in});
    const int b = layer_norm(join(prefix, "ln2"), child_of(*m, "ln2", prefix), h);
    return simple(OpKind::kAdd, join(prefix, "add2"), {ffn(join(prefix, "mlp"), child_of(*m, "mlp", prefix), b, p), h});
  }

  int gpt(const models::GPTImpl& g, int in) {
    const auto& o = g.options();
    graph.model_type = "gpt", graph.input_kind = "tokens", graph.sample_shape = {o.seq_len};
    Node e;
    e.kind = OpKind::kEmbedTokens, e.op_type = "Embedding", e.name = "wte", e.inputs = {in};
    e.weight = g.wte->weight, e.aux = g.wpe->weight;
    int x = dropout("drop", add(std::move(e)), o.dropout);
    const auto& blocks = *g.blocks;
    for (size_t i = 0; i < blocks.size(); ++i) {
      x = block("blocks." + std::to_string(i), blocks.ptr(i), x, o.heads, o.seq_len, o.dropout);
    }
    x = layer_norm("ln_f", child_of(g, "ln_f", ""), x);
    Node head;
    head.kind = OpKind::kLinear, head.op_type = "Linear", head.name = "lm_head", head.inputs = {x};
    head.weight = g.lm_head ? g.lm_head->weight : g.wte->weight;  // tied: the embedding itself
    return add(std::move(head));
  }

  // nn::GridAttention: qkv, the 2-D attention over its own grid, proj, dropout (its own options).
  int grid_attention(const std::string& prefix, const ModulePtr& m, int in) {
    auto* ga = as<nn::GridAttentionImpl>(m);
    if (ga == nullptr) unsupported(prefix, *m);
    const auto& o = ga->options();
    Node n;
    n.kind = OpKind::kGridAttention, n.op_type = "GridAttention", n.name = join(prefix, "attention");
    n.heads = o.num_heads, n.windows = o.windows, n.causal = false;
    n.grid_h = o.grid_h, n.grid_w = o.grid_w, n.cls_token = o.cls_token, n.max_T = ga->tokens();
    n.inputs = {linear(join(prefix, "qkv"), ga->qkv.ptr(), in)};
    const int y = add(std::move(n));
    return dropout(join(prefix, "dropout"), linear(join(prefix, "proj"), ga->proj.ptr(), y), o.dropout);
  }

  int vit_block(const std::string& prefix, const ModulePtr& m, int in) {
    auto* vb = as<models::VitBlockImpl>(m);
    if (vb == nullptr) unsupported(prefix, *m);
    const double p = vb->attn->options().dropout;
    const int a = layer_norm(join(prefix, "ln1"), child_of(*m, "ln1", prefix), in);
    const int h = simple(OpKind::kAdd, join(prefix, "add1"), {grid_attention(join(prefix, "attn"), vb->attn.ptr(), a), in});
    const int b = layer_norm(join(prefix, "ln2"), child_of(*m, "ln2", prefix), h);
    return simple(OpKind::kAdd, join(prefix, "add2"), {ffn(join(prefix, "mlp"), vb->mlp.ptr(), b, p), h});
  }

  // models::Vit: patchify + patch_embed (a Linear), class token and positions, blocks, ln_f, pool, head.
  int vit(const models::VitImpl& v, int in) {
    const auto& a = v.args();
    graph.model_type = "vit", graph.input_kind = "image", graph.sample_shape = {a.channels, a.image_h, a.image_w};
    Node pf;
    pf.kind = OpKind::kPatchify, pf.op_type = "Patchify", pf.name = "patchify", pf.inputs = {in};
    pf.patch = a.patch, pf.grid_h = v.grid_h(), pf.grid_w = v.grid_w();
    int x = linear("patch_embed", child_of(v, "patch_embed", ""), add(std::move(pf)));
    Node tp;
    tp.kind = OpKind::kTokensPos, tp.op_type = "TokensPos", tp.name = "pos_embed", tp.inputs = {x};
    tp.weight = v.pos_embed, tp.aux = v.cls_token, tp.cls_token = v.cls_token.defined();
    x = add(std::move(tp));
    const auto& blocks = *v.blocks;
    if (!blocks.is_empty()) x = dropout("drop", x, blocks[0]->as<models::VitBlockImpl>()->attn->options().dropout);
    for (size_t i = 0; i < blocks.size(); ++i) x = vit_block("blocks." + std::to_string(i), blocks.ptr(i), x);
    x = layer_norm("ln_f", child_of(v, "ln_f", ""), x);
    Node pool;
    pool.kind = OpKind::kPoolTokens, pool.op_type = "PoolTokens", pool.name = "pool", pool.inputs = {x};
    pool.cls_token = v.cls_token.defined();
    return linear("head", child_of(v, "head", ""), add(std::move(pool)));
  }

  int basic_block(const std::string& prefix, const ModulePtr& m, int in) {
    if (!child_of(*m, "conv1", prefix, false) || !child_of(*m, "bn2", prefix, false)) unsupported(prefix, *m);
    int h = batch_norm(join(prefix, "bn1"), child_of(*m, "bn1", prefix), conv(join(prefix, "conv1"), child_of(*m, "conv1", prefix), in));
    h = relu(join(prefix, "relu1"), h);
    h = batch_norm(join(prefix, "bn2"), child_of(*m, "bn2", prefix), conv(join(prefix, "conv2"), child_of(*m, "conv2", prefix), h));
    int shortcut = in;
    if (auto ds = child_of(*m, "downsample", prefix, false)) {
      const std::string d = join(prefix, "downsample");
      shortcut = batch_norm(d + ".1", child_of(*ds, "1", d), conv(d + ".0", child_of(*ds, "0", d), in));
    }
    return simple(OpKind::kRelu, join(prefix, "relu"), {simple(OpKind::kAdd, join(prefix, "add"), {h, shortcut})});
  }

  int resnet(const models::ResNet18Impl& r, int in) {
    graph.model_type = "resnet18", graph.input_kind = "image";
    int x = batch_norm("bn1", child_of(r, "bn1", ""), conv("conv1", child_of(r, "conv1", ""), in));
    x = relu("relu", x);
    for (int l = 1; l <= 4; ++l) {
      const std::string name = "layer" + std::to_string(l);
      for (const auto& b : child_of(r, name, "")->named_children()) x = basic_block(join(name, b.key()), b.value(), x);
    }
    return linear("fc", child_of(r, "fc", ""), simple(OpKind::kMeanHW, "avgpool", {x}));
  }

  int mlp(const models::MlpClassifierImpl& m, int in) {
    graph.model_type = "mlp", graph.input_kind = "features";
    int x = simple(OpKind::kFlatten, "flatten", {in});
    for (const auto& h : child_of(m, "hidden", "")->named_children()) {
      x = dropout("hidden." + h.key() + ".dropout", linear("hidden." + h.key(), h.value(), x, /*relu=*/true),
                  hints_.dropout);
    }
    return linear("head", child_of(m, "head", ""), x);
  }

  // Any module: the tracer registered for its type, or a UsageError naming the model, type and path.
  int trace_module(const std::string& path, const ModulePtr& m, int in) override {
    const std::string type = module_type_name(*m);
    const ModuleTracer* tracer = find_tracer(type);
    if (tracer == nullptr) {
      XTRAIN_USAGE_ERROR("compress/export: ", hints_.model.empty() ? "" : "model " + hints_.model + ": ", "module ", type,
                         " at layer '", path.empty() ? "<root>" : path, "' is not traceable (register a tracer ",
                         "for it with compress::register_tracer, compress/graph/trace.h, made of traceable modules: ",
                         traceable_list(), ")");
    }
    return (*tracer)(*this, path, m, in);
  }
  ModulePtr child(const torch::nn::Module& m, const std::string& name, const std::string& path) override {
    return child_of(m, name, path);
  }
  int add(const std::string& name, int a, int b) override { return simple(OpKind::kAdd, name, {a, b}); }
  const TraceHints& hints() const override { return hints_; }

  std::string root_type;

 private:
  TraceHints hints_;
};

struct TracerEntry {
  ModuleTracer trace;
  bool builtin = false;  // one of the layers above (a root of this kind is a "layer" graph)
};

template <class T>
void add_layer(Registry<TracerEntry>& r, int (*fn)(Tracer&, const std::string&, const ModulePtr&, int)) {
  r.add(c10::demangle_type<T>(), TracerEntry{[fn](TraceContext& ctx, const std::string& path, const ModulePtr& m, int in) {
                                               return fn(static_cast<Tracer&>(ctx), path, m, in);
                                             },
                                             true});
}

// The built-ins: each calls the Tracer method for its kind (a built-in is only ever given a Tracer).
void add_builtin_tracers(Registry<TracerEntry>& r) {
  using P = const ModulePtr&;
  add_layer<models::GPTImpl>(r, [](Tracer& t, const std::string&, P m, int in) { return t.gpt(*as<models::GPTImpl>(m), in); });
  add_layer<models::ResNet18Impl>(r, [](Tracer& t, const std::string&, P m, int in) {
    return t.resnet(*as<models::ResNet18Impl>(m), in);
  });
  add_layer<models::MlpClassifierImpl>(r, [](Tracer& t, const std::string&, P m, int in) {
    return t.mlp(*as<models::MlpClassifierImpl>(m), in);
  });
  add_layer<models::VitImpl>(r, [](Tracer& t, const std::string&, P m, int in) { return t.vit(*as<models::VitImpl>(m), in); });
  add_layer<models::VitBlockImpl>(r, [](Tracer& t, const std::string& p, P m, int in) { return t.vit_block(p, m, in); });
  add_layer<models::VitMlpImpl>(r, [](Tracer& t, const std::string& p, P m, int in) { return t.ffn(p, m, in, 0.0); });
  add_layer<nn::GridAttentionImpl>(r, [](Tracer& t, const std::string& p, P m, int in) {
    return t.grid_attention(p, m, in);
  });
  add_layer<nn::LinearImpl>(r, [](Tracer& t, const std::string& p, P m, int in) { return t.linear(p, m, in); });
  add_layer<torch::nn::LinearImpl>(r, [](Tracer& t, const std::string& p, P m, int in) { return t.linear(p, m, in); });
  add_layer<torch::nn::Conv2dImpl>(r, [](Tracer& t, const std::string& p, P m, int in) { return t.conv(p, m, in); });
  add_layer<torch::nn::BatchNorm2dImpl>(r, [](Tracer& t, const std::string& p, P m, int in) { return t.batch_norm(p, m, in); });
  add_layer<torch::nn::ReLUImpl>(r, [](Tracer& t, const std::string& p, P, int in) { return t.relu(p, in); });
  add_layer<torch::nn::GELUImpl>(r, [](Tracer& t, const std::string& p, P m, int in) {
    if (as<torch::nn::GELUImpl>(m)->options.approximate() != "tanh") unsupported(p, *m);
    return t.simple(OpKind::kGeluTanh, p, {in});
  });
  add_layer<torch::nn::FlattenImpl>(r, [](Tracer& t, const std::string& p, P, int in) { return t.simple(OpKind::kFlatten, p, {in}); });
  add_layer<torch::nn::DropoutImpl>(r, [](Tracer& t, const std::string& p, P m, int in) {
    return t.dropout(p, in, as<torch::nn::DropoutImpl>(m)->options.p());
  });
  add_layer<nn::LayerNormImpl>(r, [](Tracer& t, const std::string& p, P m, int in) { return t.layer_norm(p, m, in); });
  add_layer<nn::MlpImpl>(r, [](Tracer& t, const std::string& p, P m, int in) { return t.ffn(p, m, in, 0.0); });
  add_layer<nn::BlockImpl>(r, [](Tracer& t, const std::string& p, P m, int in) {
    return t.block(p, m, in, t.hints().heads, t.hints().seq_len, 0.0);
  });
  auto attention = [](Tracer& t, const std::string& p, P m, int in) {
    return t.attention(p, m, in, t.hints().heads, t.hints().seq_len, 0.0);
  };
  add_layer<nn::CausalSelfAttentionImpl>(r, attention);
  add_layer<nn::MultiScaleAttentionImpl>(r, attention);
  add_layer<torch::nn::SequentialImpl>(r, [](Tracer& t, const std::string& p, P m, int in) {
    for (const auto& c : m->named_children()) in = t.trace_module(join(p, c.key()), c.value(), in);
    return in;
  });
}

Registry<TracerEntry>& tracers() {
  static auto* r = new Registry<TracerEntry>("tracer", add_builtin_tracers);
  return *r;
}

std::string traceable_list() {
  std::string list;
  for (const auto& name : tracers().names()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

const ModuleTracer* find_tracer(const std::string& type) {
  const TracerEntry* e = tracers().lookup(type);
  return e ? &e->trace : nullptr;
}

}  // namespace

void register_tracer(const std::string& module_type, ModuleTracer tracer) {
  XTRAIN_USAGE_CHECK(!module_type.empty() && tracer, "compress: register_tracer needs a module type and a tracer");
  tracers().add(module_type, TracerEntry{std::move(tracer), false});
}

std::string module_type_name(const torch::nn::Module& module) { return c10::demangle(typeid(module).name()); }

std::vector<std::string> tracer_names() { return tracers().names(); }

Graph trace(const torch::nn::Module& root, const TraceHints& hints) {
  Tracer t(hints);
  t.root_type = module_type_name(root);
  t.graph.input_kind = "features";  // the assemblies set their own
  // The tracer needs a shared_ptr: clone-free aliasing of the caller's module.
  ModulePtr alias(ModulePtr(), const_cast<torch::nn::Module*>(&root));
  t.graph.output = t.trace_module("", alias, 0);
  if (t.graph.model_type.empty()) {
    const TracerEntry* e = tracers().lookup(t.root_type);
    const bool sequential = dynamic_cast<const torch::nn::SequentialImpl*>(&root) != nullptr;
    t.graph.model_type = sequential ? "sequential" : e->builtin ? "layer" : hints.model.empty() ? t.root_type : hints.model;
  }
  Graph g = std::move(t.graph);
  if (g.input_kind != "tokens" && (!hints.sample_shape.empty() || g.model_type != "vit")) {
    g.sample_shape = hints.sample_shape;  // a ViT knows its own image size
  }
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
