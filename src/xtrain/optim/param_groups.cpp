#include "xtrain/optim/param_groups.h"

#include <fnmatch.h>

#include <c10/util/StringUtil.h>

#include "xtrain/base/error.h"

namespace xtrain::optim {
namespace {

// The index of the first spec with a glob matching `name`, or -1.
int matching_spec(const std::string& name, const std::vector<ParamGroupSpec>& specs) {
  for (size_t i = 0; i < specs.size(); ++i) {
    for (const auto& glob : specs[i].params) {
      if (fnmatch(glob.c_str(), name.c_str(), 0) == 0) return static_cast<int>(i);
    }
  }
  return -1;
}

std::string quoted_list(const std::vector<std::string>& items, size_t limit) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i) out += (i ? ", \"" : "\"") + items[i] + "\"";
  if (items.size() > limit) out += c10::str(", … (", items.size(), " in all)");
  return out;
}

}  // namespace

ParamGroupOf assign_param_groups(const std::vector<std::pair<std::string, at::Tensor>>& params,
                                 const OptimizerOptions& options) {
  const auto& specs = options.param_groups;
  ParamGroupOf of;
  std::vector<int> matched(specs.size(), 0);
  std::vector<std::string> names;
  for (const auto& [name, p] : params) {
    names.push_back(name);
    const int spec = matching_spec(name, specs);
    if (spec >= 0) {
      of[name] = 2 + spec;
      ++matched[spec];
    } else {
      of[name] = options.no_decay_for_bias_and_norm && p.dim() < 2 ? 1 : 0;
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    XTRAIN_USAGE_CHECK(matched[i] > 0, "config: xtrain.param_groups[", i, "] (params ",
                       quoted_list(specs[i].params, specs[i].params.size()),
                       ") matches no parameter not already in an earlier group; the parameters are ",
                       quoted_list(names, 8));
  }
  return of;
}

std::vector<GroupHyper> group_hypers(const OptimizerOptions& options) {
  const double weight_decay = options.weight_decay();
  std::vector<GroupHyper> out = {GroupHyper{1.0, weight_decay}, GroupHyper{1.0, 0.0}};
  for (const auto& spec : options.param_groups) {
    out.push_back(GroupHyper{spec.lr_scale, spec.weight_decay < 0 ? weight_decay : spec.weight_decay});
  }
  return out;
}

std::vector<GroupHyper> at_lr(std::vector<GroupHyper> groups, double lr) {
  for (auto& g : groups) g.lr = lr * g.lr;  // lr * 1.0 is lr exactly: groups 0 and 1 step with the schedule's lr
  return groups;
}

std::vector<GroupHyper> group_hypers(const OptimizerOptions& options, double lr) {
  return at_lr(group_hypers(options), lr);
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
