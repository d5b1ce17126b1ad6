// The loss registry: xtrain.loss.type -> a factory of the loss over flat logits [N, V] (fp32) and
// int64 targets [N], and the checks of its keys. make_loss (losses.h) asks it and adds what every
// loss shares (flattening [B, T, V], fp32 upcast). Built-ins: cross_entropy (label smoothing) and
// focal (losses.cpp). Adding a loss is one file and one register_loss() call.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "xtrain/nn/losses.h"
#include "xtrain/nn/options.h"

namespace xtrain::nn {

struct LossEntry {
  std::string name;
  std::string description;
  std::function<void(const LossOptions&)> check;  // UsageError naming xtrain.loss.<key>; optional
  std::function<LossFn(const LossOptions&)> make;
};

void register_loss(LossEntry entry);  // replaces an entry of that name
bool unregister_loss(const std::string& name);
// UsageError naming xtrain.loss.type, the closest name and the list when `type` is unknown.
const LossEntry& find_loss(const std::string& type);
std::vector<std::string> loss_names();

// The built-ins (losses.cpp).
std::vector<LossEntry> builtin_losses();

}  // namespace xtrain::nn
