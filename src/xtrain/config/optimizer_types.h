// The optimizer types the config reader knows: name, params block (read, written, documented),
// checks, lr and weight decay. DeepSpeed's four built-ins are declared here, beside the reader;
// optim::register_optimizer (optim/registry.h) adds the config half of any other optimizer here in
// the same call that registers its factory, so config/ never includes optim/ (layers L1 < L2).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "xtrain/base/registry.h"
#include "xtrain/config/section_type.h"
#include "xtrain/optim/options.h"

namespace xtrain::config {

struct OptimizerType : SectionType<optim::OptimizerOptions> {
  std::function<double(const optim::OptimizerOptions&)> lr;
  std::function<double(const optim::OptimizerOptions&)> weight_decay;
};

// Names compare case-insensitively (DeepSpeed matches adam/adamw/lamb so; xtrain does for all).
Registry<OptimizerType>& optimizer_types();

// The registered name `type` spells (any case), or a UsageError naming optimizer.type: "not
// supported yet" for DeepSpeed/torch optimizers xtrain lacks, else the list and the closest name.
std::string normalise_optimizer_type(const std::string& type);

// A type whose params struct P (with lr, weight_decay and visit(V&)) lives in
// OptimizerOptions::custom: what a registered optimizer that is not built in uses.
// The params of a custom type (defaults when the options hold none).
template <class P>
P custom_params(const optim::OptimizerOptions& o) {
  const P* p = std::any_cast<P>(&o.custom);
  return p ? *p : P{};
}

template <class P>
OptimizerType custom_optimizer_type(const std::string& name, const std::string& description) {
  OptimizerType t = custom_section_type<OptimizerType, P>(name, description);
  t.lr = [](const optim::OptimizerOptions& o) { return custom_params<P>(o).lr; };
  t.weight_decay = [](const optim::OptimizerOptions& o) { return custom_params<P>(o).weight_decay; };
  return t;
}

}  // namespace xtrain::config
