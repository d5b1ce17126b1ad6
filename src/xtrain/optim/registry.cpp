// The optimizer registry (registry.h): a base/registry.h table filled with the built-ins on first
// use, and make_optimizer, which checks what every optimizer relies on and asks the entry.
#include "xtrain/optim/registry.h"

#include "xtrain/base/error.h"

namespace xtrain::optim {
namespace {

Registry<OptimizerEntry>& table() {
  static auto* r = new Registry<OptimizerEntry>("optimizer", [](Registry<OptimizerEntry>& reg) {
    for (auto make : {adam_entry, adamw_entry, lamb_entry, sgd_entry, lbfgs_entry}) {
      OptimizerEntry e = make();
      const std::string name = e.config.name;
      reg.add(name, std::move(e));
    }
  });  // never destroyed: optimizers may be built during static destruction
  return *r;
}

void check_common(double lr, double weight_decay) {
  XTRAIN_USAGE_CHECK(lr >= 0, "optim: lr must be >= 0, got ", lr, " (optimizer.params.lr)");
  XTRAIN_USAGE_CHECK(weight_decay >= 0, "optim: weight_decay must be >= 0, got ", weight_decay,
                     " (optimizer.params.weight_decay)");
}

}  // namespace

void register_optimizer(OptimizerEntry entry) {
  const std::string name = entry.config.name;
  XTRAIN_USAGE_CHECK(!name.empty() && entry.make && entry.config.lr && entry.config.weight_decay,
                     "optim: register_optimizer needs a name, a factory, and lr and weight_decay accessors (\"", name,
                     "\")");
  config::optimizer_types().add(name, entry.config);
  table().add(name, std::move(entry));
}

bool unregister_optimizer(const std::string& name) {
  const bool config_had = config::optimizer_types().remove(name);
  return table().remove(name) || config_had;
}

const OptimizerEntry& find_optimizer(const std::string& type) { return table().find(type, "optimizer.type"); }

std::vector<std::string> optimizer_names() { return table().names(); }

std::string zero_support_summary() {
  std::vector<std::string> tested, untested;
  for (const auto& name : optimizer_names()) {
    const auto zero = find_optimizer(name).zero;
    if (zero == ZeroSupport::tested) tested.push_back(name);
    if (zero == ZeroSupport::untested) untested.push_back(name);
  }
  std::string out = Registry<OptimizerEntry>::join(tested);
  if (!untested.empty()) out += " and, with zero_allow_untested_optimizer, " + Registry<OptimizerEntry>::join(untested);
  return out;
}

void check_betas(const std::vector<double>& betas) {
  XTRAIN_USAGE_CHECK(betas.size() == 2, "optim: betas must hold 2 numbers, got ", betas.size(),
                     " (optimizer.params.betas)");
  for (double b : betas) {
    XTRAIN_USAGE_CHECK(b >= 0 && b < 1, "optim: betas must be in [0, 1), got ", b, " (optimizer.params.betas)");
  }
}

void check_eps(double eps) {
  XTRAIN_USAGE_CHECK(eps >= 0, "optim: eps must be >= 0, got ", eps, " (optimizer.params.eps)");
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options) {
  const OptimizerEntry& entry = find_optimizer(options.type);
  check_common(entry.config.lr(options), entry.config.weight_decay(options));
  return entry.make(options);
}

double OptimizerOptions::lr() const { return find_optimizer(type).config.lr(*this); }

double OptimizerOptions::weight_decay() const { return find_optimizer(type).config.weight_decay(*this); }

}  // namespace xtrain::optim
