// DeepSpeed's built-in optimizer types (and torch's LBFGS) as the config reader knows them, and the
// name lookup with DeepSpeed's matching rule (case-insensitive) and its messages.
#include "xtrain/config/optimizer_types.h"

#include <c10/util/StringUtil.h>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"
#include "xtrain/optim/lbfgs/options.h"

namespace xtrain::config {
namespace {

using optim::OptimizerOptions;

#define XTRAIN_CONFIG_CHECK(cond, ...)                      \
  do {                                                      \
    if (!(cond)) errors.push_back(::c10::str(__VA_ARGS__)); \
  } while (0)

void check_betas(const std::vector<double>& betas, std::vector<std::string>& errors) {
  XTRAIN_CONFIG_CHECK(betas.size() == 2, "config: optimizer.params.betas must hold 2 numbers, got ", betas.size());
  for (double b : betas) {
    XTRAIN_CONFIG_CHECK(b >= 0 && b < 1, "config: optimizer.params.betas must be in [0, 1), got ", b);
  }
}

template <class P>
OptimizerType builtin(const char* name, const char* description, const char* label, P OptimizerOptions::*member) {
  OptimizerType t = member_section_type<OptimizerType>(name, description, label, member);
  t.lr = [member](const OptimizerOptions& o) { return (o.*member).lr; };
  t.weight_decay = [member](const OptimizerOptions& o) { return (o.*member).weight_decay; };
  return t;
}

OptimizerType adam(const char* name, const char* description, const char* label) {
  OptimizerType t = builtin(name, description, label, &OptimizerOptions::adam);
  t.validate = [](const OptimizerOptions& o, std::vector<std::string>& errors) {
    check_betas(o.adam.betas, errors);
    XTRAIN_CONFIG_CHECK(o.adam.state_dtype == "fp32" || o.adam.state_dtype == "int8",
                        "config: optimizer.params.state_dtype must be \"fp32\" or \"int8\" (8-bit moments), got \"",
                        o.adam.state_dtype, "\"");
  };
  return t;
}

// torch.optim.LBFGS (DeepSpeed has none): one group, no weight decay, the loss re-run within a step.
OptimizerType lbfgs() {
  using optim::LbfgsParams;
  OptimizerType t = custom_section_type<OptimizerType, LbfgsParams>(
      "LBFGS", "L-BFGS as torch.optim.LBFGS (xtrain; fp32, ZeRO stage 0, no accumulation; history not checkpointed)");
  t.lr = [](const OptimizerOptions& o) { return custom_params<LbfgsParams>(o).lr; };
  t.weight_decay = [](const OptimizerOptions&) { return 0.0; };
  t.validate = [](const OptimizerOptions& o, std::vector<std::string>& errors) {
    const auto p = custom_params<LbfgsParams>(o);
    XTRAIN_CONFIG_CHECK(p.line_search_fn.empty() || p.line_search_fn == "strong_wolfe",
                        "config: optimizer.params.line_search_fn must be null or \"strong_wolfe\", got \"",
                        p.line_search_fn, "\"");
    XTRAIN_CONFIG_CHECK(p.max_iter >= 1 && p.history_size >= 1 && p.resolved_max_eval() >= 1,
                        "config: optimizer.params.max_iter, max_eval and history_size must be >= 1, got ", p.max_iter,
                        ", ", p.resolved_max_eval(), " and ", p.history_size);
  };
  return t;
}

void add_builtins(Registry<OptimizerType>& r) {
  r.add("Adam", adam("Adam", "Adam; decoupled weight decay unless adam_w_mode is false (DeepSpeed's default)",
                     "params (Adam, AdamW)"));
  OptimizerType adamw = adam("AdamW", "Adam with decoupled weight decay (adam_w_mode is always true)", "");
  adamw.read = [](JsonReader& v, OptimizerOptions& o) {
    o.adam.visit(v);
    o.adam.adam_w_mode = true;
  };
  r.add("AdamW", std::move(adamw));
  OptimizerType lamb = builtin("Lamb", "LAMB: Adam with a layer-wise trust ratio", "params (Lamb)",
                               &OptimizerOptions::lamb);
  lamb.validate = [](const OptimizerOptions& o, std::vector<std::string>& errors) {
    check_betas(o.lamb.betas, errors);
    XTRAIN_CONFIG_CHECK(o.lamb.min_coeff <= o.lamb.max_coeff, "config: optimizer.params.min_coeff (",
                        o.lamb.min_coeff, ") must be <= max_coeff (", o.lamb.max_coeff, ")");
  };
  r.add("Lamb", std::move(lamb));
  OptimizerType sgd = builtin("SGD", "SGD with momentum, dampening, Nesterov and L2 weight decay", "params (SGD)",
                              &OptimizerOptions::sgd);
  sgd.validate = [](const OptimizerOptions& o, std::vector<std::string>& errors) {
    XTRAIN_CONFIG_CHECK(!o.sgd.nesterov || (o.sgd.momentum > 0 && o.sgd.dampening == 0),
                        "config: optimizer.params.nesterov needs momentum > 0 and dampening = 0");
  };
  r.add("SGD", std::move(sgd));
  r.add("LBFGS", lbfgs());
}

#undef XTRAIN_CONFIG_CHECK

bool same_ignoring_case(const std::string& a, const std::string& b) {
  return a.size() == b.size() && edit_distance(a, b) == 0;  // edit_distance ignores case
}

}  // namespace

Registry<OptimizerType>& optimizer_types() {
  static auto* r = new Registry<OptimizerType>("optimizer", add_builtins);  // never destroyed
  return *r;
}

std::string normalise_optimizer_type(const std::string& type) {
  const std::vector<std::string> ours = optimizer_types().names();
  for (const auto& name : ours) {
    if (same_ignoring_case(type, name)) return name;
  }
  std::string list, quoted;
  for (size_t i = 0; i < ours.size(); ++i) {
    list += (i ? ", " : "") + ours[i];
    quoted += (i ? ", \"" : "\"") + ours[i] + "\"";
  }
  // DeepSpeed's and torch.optim's optimizers that xtrain does not have (yet).
  const std::vector<std::string> theirs = {"OneBitAdam", "ZeroOneAdam", "OneBitLamb", "Adagrad", "Lion",
                                           "MuAdam", "MuAdamW", "MuSGD", "RMSprop", "Adamax", "NAdam", "RAdam"};
  for (const auto& name : theirs) {
    XTRAIN_USAGE_CHECK(!same_ignoring_case(type, name), "config: not supported yet: optimizer.type=\"", type,
                       "\" (xtrain has ", list, ")");
  }
  XTRAIN_USAGE_ERROR("config: optimizer.type must be one of ", quoted, ", got \"", type, "\"",
                     did_you_mean_suffix(type, ours));
}

}  // namespace xtrain::config
