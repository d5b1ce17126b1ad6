#include "xtrain/optim/param_groups.h"

namespace xtrain::optim {

ParamGroupOf assign_param_groups(const std::vector<std::pair<std::string, at::Tensor>>& params,
                                 const OptimizerOptions& options) {
  ParamGroupOf of;
  for (const auto& [name, p] : params) of[name] = options.no_decay_for_bias_and_norm && p.dim() < 2 ? 1 : 0;
  return of;
}

std::vector<GroupHyper> group_hypers(const OptimizerOptions& options, double lr) {
  return {GroupHyper{lr, options.weight_decay()}, GroupHyper{lr, 0.0}};
}

std::vector<int> group_indices(const std::vector<std::pair<std::string, at::Tensor>>& params, const ParamGroupOf& of) {
  std::vector<int> out;
  out.reserve(params.size());
  for (const auto& [name, p] : params) {
    const auto it = of.find(name);
    out.push_back(it == of.end() ? 0 : it->second);
  }
  return out;
}

}  // namespace xtrain::optim
