// prune_channels: dependency check on the graph, norms, index_select + set_data.
#include "xtrain/compress/prune/channel_prune.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include <algorithm>
#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/compress/graph/trace.h"

namespace xtrain::compress {

namespace {

bool passes_channels(OpKind k) { return k == OpKind::kRelu || k == OpKind::kGeluTanh || k == OpKind::kDropout; }

void shrink(const at::Tensor& t, int64_t dim, const at::Tensor& index) {
  if (!t.defined()) return;
  auto& mutable_t = const_cast<at::Tensor&>(t);
  if (mutable_t.grad().defined()) mutable_t.mutable_grad() = at::Tensor();
  mutable_t.set_data(t.detach().index_select(dim, index).clone());
}

void update_module_options(torch::nn::Module& root, const Node& producer, const Node& consumer, int64_t kept) {
  if (producer.kind == OpKind::kConv2d) {
    if (auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(find_module(root, producer.name).get())) {
      c->options.out_channels(kept);
    }
    if (auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(producer.bn_module.get())) bn->options.num_features(kept);
  }
  if (consumer.kind == OpKind::kConv2d) {
    if (auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(find_module(root, consumer.name).get())) {
      c->options.in_channels(kept);
    }
  }
}

}  // namespace

int channel_consumer(const Graph& graph, int node, std::string* why) {
  const Node& p = graph.nodes[node];
  int value = p.output;
  while (true) {
    if (value == graph.output) {
      *why = "its output is the model's output";
      return -1;
    }
    const auto readers = graph.consumers(value);
    if (readers.size() != 1) {
      *why = c10::str("its output has ", readers.size(), " readers (a residual or a branch)");
      return -1;
    }
    const Node& r = graph.nodes[readers[0]];
    if (passes_channels(r.kind)) {
      value = r.output;
      continue;
    }
    if ((r.kind == OpKind::kLinear && p.kind == OpKind::kLinear) || (r.kind == OpKind::kConv2d && p.kind == OpKind::kConv2d)) {
      return readers[0];
    }
    *why = c10::str("its output goes to ", op_name(r.kind), " '", r.name, "'");
    return -1;
  }
}

std::vector<int64_t> channels_to_keep(const at::Tensor& weight, double sparsity, int p) {
  const int64_t n = weight.size(0);
  const int64_t keep = std::max<int64_t>(1, n - static_cast<int64_t>(std::floor(sparsity * static_cast<double>(n))));
  const auto norms = weight.detach().reshape({n, -1}).to(at::kDouble).norm(p, {1});
  auto idx = std::get<1>(at::topk(norms, keep, 0, /*largest=*/true, /*sorted=*/true));
  idx = std::get<0>(at::sort(idx));
  return std::vector<int64_t>(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + keep);
}

ChannelPruneReport prune_channels(torch::nn::Module& root, const Graph& graph, const std::vector<PruneTarget>& targets,
                                  int p) {
  XTRAIN_USAGE_CHECK(p == 1 || p == 2, "compress: channel pruning norm must be 1 or 2, got ", p);
  at::NoGradGuard no_grad;
  ChannelPruneReport report;
  for (const auto& t : targets) {
    std::string why;
    const int c = channel_consumer(graph, t.node, &why);
    if (c < 0) {
      report.skipped.push_back(t.name + ": " + why);
      continue;
    }
    const Node& prod = graph.nodes[t.node];
    const Node& cons = graph.nodes[c];
    const auto keep = channels_to_keep(prod.weight, t.sparsity, p);
    const auto index = at::tensor(keep, at::kLong);
    const int64_t before = prod.weight.size(0);
    for (const auto* tensor : {&prod.weight, &prod.bias, &prod.bn_weight, &prod.bn_bias, &prod.bn_mean, &prod.bn_var}) {
      shrink(*tensor, 0, index);
    }
    shrink(cons.weight, 1, index);
    update_module_options(root, prod, cons, static_cast<int64_t>(keep.size()));
    report.pruned.push_back({t.name, cons.name, before, static_cast<int64_t>(keep.size())});
  }
  return report;
}

}  // namespace xtrain::compress
