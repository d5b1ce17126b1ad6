// The loss registry (losses_registry.h): a base/registry.h table filled with the built-ins on first use.
#include "xtrain/nn/losses_registry.h"

#include "xtrain/base/error.h"
#include "xtrain/base/registry.h"

namespace xtrain::nn {
namespace {

Registry<LossEntry>& table() {
  static auto* r = new Registry<LossEntry>("loss", [](Registry<LossEntry>& reg) {
    for (auto& e : builtin_losses()) {
      const std::string name = e.name;
      reg.add(name, std::move(e));
    }
  });  // never destroyed
  return *r;
}

}  // namespace

void register_loss(LossEntry entry) {
  XTRAIN_USAGE_CHECK(!entry.name.empty() && entry.make, "nn: register_loss needs a name and a factory (\"", entry.name,
                     "\")");
  const std::string name = entry.name;
  table().add(name, std::move(entry));
}

bool unregister_loss(const std::string& name) { return table().remove(name); }

const LossEntry& find_loss(const std::string& type) { return table().find(type, "xtrain.loss.type"); }

std::vector<std::string> loss_names() { return table().names(); }

}  // namespace xtrain::nn
