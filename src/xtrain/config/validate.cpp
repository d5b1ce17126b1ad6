// Value checks on the typed config after it is read: every failing check adds its message (each
// naming its key), so a file's problems are reported together.
#include "xtrain/config/validate.h"

#include <c10/util/StringUtil.h>

#include "xtrain/config/optimizer_types.h"
#include "xtrain/config/scheduler_types.h"

namespace xtrain::config {
namespace {

#define XTRAIN_CONFIG_CHECK(cond, ...)                           \
  do {                                                           \
    if (!(cond)) errors.push_back(::c10::str(__VA_ARGS__));      \
  } while (0)

// Each type checks its own params (config/optimizer_types.cpp, config/scheduler_types.cpp); the lr
// and weight decay every optimizer has are checked here.
void validate_optimizer(const Config& c, std::vector<std::string>& errors) {
  const auto& o = c.optimizer;
  if (const OptimizerType* t = optimizer_types().lookup(o.type)) {
    if (t->validate) t->validate(o, errors);
    XTRAIN_CONFIG_CHECK(t->lr(o) >= 0, "config: optimizer.params.lr must be >= 0, got ", t->lr(o));
    XTRAIN_CONFIG_CHECK(t->weight_decay(o) >= 0, "config: optimizer.params.weight_decay must be >= 0, got ",
                        t->weight_decay(o));
  }
  for (size_t i = 0; i < o.param_groups.size(); ++i) {
    const auto& g = o.param_groups[i];
    XTRAIN_CONFIG_CHECK(!g.params.empty(), "config: xtrain.param_groups[", i, "].params must name at least one glob");
    XTRAIN_CONFIG_CHECK(g.lr_scale >= 0, "config: xtrain.param_groups[", i, "].lr_scale must be >= 0, got ",
                        g.lr_scale);
    XTRAIN_CONFIG_CHECK(g.weight_decay >= 0 || g.weight_decay == -1, "config: xtrain.param_groups[", i,
                        "].weight_decay must be >= 0 (or -1: the optimizer's), got ", g.weight_decay);
  }
  if (const SchedulerType* t = scheduler_types().lookup(c.scheduler.type)) {
    if (t->validate) t->validate(c.scheduler, errors);
  }
}

void validate_trainer(const Config& c, std::vector<std::string>& errors) {
  const auto& t = c.trainer;
  XTRAIN_CONFIG_CHECK(t.steps > 0, "config: xtrain.steps must be > 0, got ", t.steps);
  XTRAIN_CONFIG_CHECK(t.eval_interval >= 0, "config: xtrain.eval_interval must be >= 0, got ", t.eval_interval);
  XTRAIN_CONFIG_CHECK(t.save_interval >= -1, "config: xtrain.save_interval must be >= -1, got ", t.save_interval);
  XTRAIN_CONFIG_CHECK(t.keep_checkpoints >= 0, "config: xtrain.keep_checkpoints must be >= 0, got ",
                      t.keep_checkpoints);
  XTRAIN_CONFIG_CHECK(c.model.dropout >= 0 && c.model.dropout < 1,
                      "config: xtrain.model.dropout must be in [0, 1), got ", c.model.dropout);
  XTRAIN_CONFIG_CHECK(c.data.val_fraction > 0 && c.data.val_fraction < 1,
                      "config: xtrain.data.val_fraction must be in (0, 1), got ", c.data.val_fraction);
}

}  // namespace

void validate(const Config& c, std::vector<std::string>& errors) {
  XTRAIN_CONFIG_CHECK(!(c.fp16.enabled && c.bf16.enabled),
                      "config: fp16.enabled and bf16.enabled are both true; choose one (bf16 needs no loss scaling)");
  XTRAIN_CONFIG_CHECK(c.zero_optimization.stage >= 0 && c.zero_optimization.stage <= 3,
                      "config: zero_optimization.stage must be 0, 1, 2 or 3, got ", c.zero_optimization.stage);
  XTRAIN_CONFIG_CHECK(c.engine.gradient_clipping >= 0, "config: gradient_clipping must be >= 0, got ",
                      c.engine.gradient_clipping);
  XTRAIN_CONFIG_CHECK(c.engine.steps_per_print > 0, "config: steps_per_print must be > 0, got ",
                      c.engine.steps_per_print);
  validate_optimizer(c, errors);
  validate_trainer(c, errors);
}

#undef XTRAIN_CONFIG_CHECK

}  // namespace xtrain::config
