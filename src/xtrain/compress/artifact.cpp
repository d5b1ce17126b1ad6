// artifact: pickled tensor dicts and a small JSON for the quantisation state.
#include "xtrain/compress/artifact.h"

#include <ATen/core/Dict.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/serialize.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "xtrain/base/error.h"
#include "xtrain/compress/quant/quant_plan.h"

namespace xtrain::compress {

void save_state(const torch::nn::Module& module, const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& p : module.named_parameters()) dict.insert(p.key(), p.value().detach().contiguous());
  for (const auto& b : module.named_buffers()) dict.insert(b.key(), b.value().detach().contiguous());
  const auto bytes = torch::pickle_save(c10::IValue(dict));
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  TORCH_CHECK(out.good(), "compress: could not write ", path);
}

void load_state(torch::nn::Module& module, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  XTRAIN_USAGE_CHECK(in.good(), "compress: cannot read ", path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto dict = torch::pickle_load(bytes).toGenericDict();
  at::NoGradGuard no_grad;
  std::set<std::string> used;
  auto assign = [&](const std::string& name, at::Tensor& t) {
    XTRAIN_USAGE_CHECK(dict.contains(name), "compress: ", path, " has no tensor '", name, "'");
    const auto v = dict.at(name).toTensor();
    if (v.sizes() != t.sizes()) {
      t.set_data(v.to(t.scalar_type()).clone());
    } else {
      t.copy_(v);
    }
    used.insert(name);
  };
  for (auto& p : module.named_parameters()) assign(p.key(), p.value());
  for (auto& b : module.named_buffers()) assign(b.key(), b.value());
  for (const auto& kv : dict) {
    XTRAIN_USAGE_CHECK(used.count(kv.key().toStringRef()), "compress: ", path, " has '", kv.key().toStringRef(),
                       "', which the model does not");
  }
  for (const auto& m : module.modules()) {  // keep module options in step with resized tensors
    if (auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(m.get())) {
      c->options.out_channels(c->weight.size(0)).in_channels(c->weight.size(1));
    } else if (auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(m.get())) {
      bn->options.num_features(bn->running_mean.size(0));
    }
  }
}

std::string quant_plan_json(const Graph& graph, const QuantPlan& plan) {
  nlohmann::json j;
  const auto& o = plan.options();
  j["mode"] = o.mode;
  j["observer"] = o.observer;
  j["percentile"] = o.percentile;
  j["op_types"] = o.op_types;
  j["op_names"] = o.op_names;
  j["exclude_op_names"] = o.exclude_op_names;
  nlohmann::json layers = nlohmann::json::object();
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const auto& l = plan.at(i);
    if (!l.enabled) continue;
    layers[graph.nodes[i].name] = {{"scale", l.act.scale}, {"zero_point", l.act.zero_point}, {"dynamic", l.dynamic}};
  }
  j["layers"] = layers;
  return j.dump(2) + "\n";
}

QuantOptions quant_options_from_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  QuantOptions o;
  o.mode = j.at("mode").get<std::string>();
  o.observer = j.at("observer").get<std::string>();
  o.percentile = j.at("percentile").get<double>();
  o.op_types = j.at("op_types").get<std::vector<std::string>>();
  o.op_names = j.at("op_names").get<std::vector<std::string>>();
  o.exclude_op_names = j.at("exclude_op_names").get<std::vector<std::string>>();
  return o;
}

void restore_quant_plan(const Graph& graph, QuantPlan& plan, const std::string& text) {
  const auto layers = nlohmann::json::parse(text).at("layers");
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    auto& l = plan.at(i);
    if (!l.enabled) continue;
    const auto& name = graph.nodes[i].name;
    XTRAIN_USAGE_CHECK(layers.contains(name), "compress: quant.json has no layer '", name, "'");
    l.act.scale = layers[name].at("scale").get<float>();
    l.act.zero_point = layers[name].at("zero_point").get<int64_t>();
    l.observer.reset();
  }
  plan.convert(graph);
}

}  // namespace xtrain::compress
