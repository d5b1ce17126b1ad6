// Parameter groups: which hyper-parameters (lr, weight decay) each parameter steps with. Produced
// once, from the named parameters and the optimizer options, and shared by the engine (which
// fills GroupHyper per step) and every ZeRO strategy (which tags each flat segment with its group).
// Default: group 0 decays, group 1 ("no_decay": biases and norm weights, parameters with < 2 dims,
// as nanoGPT) does not, when no_decay_for_bias_and_norm is on. xtrain.param_groups (options.h:
// ParamGroupSpec, DeepSpeed's model_parameters groups) adds groups 2, 3, …: a parameter whose name
// matches a glob of spec i is in group 2 + i (the first matching spec wins), with lr * lr_scale.
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/optim/optimizer.h"
#include "xtrain/optim/options.h"

namespace xtrain::optim {

// Parameter name -> group index (into group_hypers()). Names absent from the map are in group 0.
using ParamGroupOf = std::map<std::string, int>;

// UsageError when a spec matches no parameter (naming xtrain.param_groups[i] and its globs).
ParamGroupOf assign_param_groups(const std::vector<std::pair<std::string, at::Tensor>>& params,
                                 const OptimizerOptions& options);

// The hyper-parameters of each group at lr 1 (lr = the group's lr_scale), resolved once from the
// options (the weight decay asks the optimizer's registry entry): the engine keeps these and scales
// them by each step's lr with at_lr().
std::vector<GroupHyper> group_hypers(const OptimizerOptions& options);
std::vector<GroupHyper> at_lr(std::vector<GroupHyper> groups, double lr);
// The hyper-parameters of each group at learning rate `lr`: at_lr(group_hypers(options), lr).
std::vector<GroupHyper> group_hypers(const OptimizerOptions& options, double lr);

// Group index per parameter, in the order of `params` (for the flat layouts).
std::vector<int> group_indices(const std::vector<std::pair<std::string, at::Tensor>>& params, const ParamGroupOf& of);

}  // namespace xtrain::optim
