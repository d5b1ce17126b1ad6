// Value checks on the typed config after it is read: every failing check adds its message (each
// naming its key), so a file's problems are reported together.
#include "xtrain/config/validate.h"

#include <c10/util/StringUtil.h>

namespace xtrain::config {
namespace {

#define XTRAIN_CONFIG_CHECK(cond, ...)                           \
  do {                                                           \
    if (!(cond)) errors.push_back(::c10::str(__VA_ARGS__));      \
  } while (0)

void validate_optimizer(const Config& c, std::vector<std::string>& errors) {
  const auto& o = c.optimizer;
  const auto& betas = o.type == "Lamb" ? o.lamb.betas : o.adam.betas;
  XTRAIN_CONFIG_CHECK(betas.size() == 2, "config: optimizer.params.betas must hold 2 numbers, got ", betas.size());
  for (double b : betas) {
    XTRAIN_CONFIG_CHECK(b >= 0 && b < 1, "config: optimizer.params.betas must be in [0, 1), got ", b);
  }
  XTRAIN_CONFIG_CHECK(o.lr() >= 0, "config: optimizer.params.lr must be >= 0, got ", o.lr());
  XTRAIN_CONFIG_CHECK(o.weight_decay() >= 0, "config: optimizer.params.weight_decay must be >= 0, got ",
                      o.weight_decay());
  if (o.type == "SGD") {
    XTRAIN_CONFIG_CHECK(!o.sgd.nesterov || (o.sgd.momentum > 0 && o.sgd.dampening == 0),
                        "config: optimizer.params.nesterov needs momentum > 0 and dampening = 0");
  }
  if (o.type == "Lamb") {
    XTRAIN_CONFIG_CHECK(o.lamb.min_coeff <= o.lamb.max_coeff, "config: optimizer.params.min_coeff (",
                        o.lamb.min_coeff, ") must be <= max_coeff (", o.lamb.max_coeff, ")");
  }
  const auto& s = c.scheduler;
  if (s.type == "OneCycle") {
    XTRAIN_CONFIG_CHECK(s.one_cycle.cycle_min_lr >= 0 && s.one_cycle.cycle_max_lr >= 0,
                        "config: scheduler.params.cycle_min_lr and cycle_max_lr are required for OneCycle");
  }
  if (s.type == "WarmupLR" || s.type == "WarmupDecayLR") {
    XTRAIN_CONFIG_CHECK(s.warmup.warmup_num_steps >= 0, "config: scheduler.params.warmup_num_steps must be >= 0");
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
