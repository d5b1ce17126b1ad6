// DeepSpeed's schedules and xtrain's Adaptive as the config reader knows them, and the name lookup
// with DeepSpeed's rule (exact names) and its messages.
#include "xtrain/config/scheduler_types.h"

#include <c10/util/StringUtil.h>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"

namespace xtrain::config {
namespace {

using sched::SchedulerOptions;

template <class P>
SchedulerType builtin(const char* name, const char* description, const char* label, P SchedulerOptions::*member) {
  return member_section_type<SchedulerType>(name, description, label, member);
}

// WarmupLR and WarmupDecayLR share WarmupParams; only WarmupDecayLR has total_num_steps.
SchedulerType warmup(const char* name, const char* description, const char* label, bool decay) {
  SchedulerType t = builtin(name, description, label, &SchedulerOptions::warmup);
  t.read = [decay](JsonReader& v, SchedulerOptions& o) {
    o.warmup.with_decay = decay;
    o.warmup.visit(v);
  };
  t.write = [decay](JsonWriter& v, SchedulerOptions& o) {
    o.warmup.with_decay = decay;
    o.warmup.visit(v);
  };
  t.document = [](DocWriter& v, SchedulerOptions& o) {
    o.warmup.with_decay = true;
    o.warmup.visit(v);
  };
  t.validate = [](const SchedulerOptions& o, std::vector<std::string>& errors) {
    if (o.warmup.warmup_num_steps < 0) errors.emplace_back("config: scheduler.params.warmup_num_steps must be >= 0");
  };
  if (decay) {
    t.resolve = [](SchedulerOptions& o, int64_t steps) -> std::string {
      if (o.warmup.total_num_steps > 0) return "";
      o.warmup.total_num_steps = steps;
      return c10::str("scheduler.params.total_num_steps = ", steps, " (from xtrain.steps)");
    };
  }
  return t;
}

void add_builtins(Registry<SchedulerType>& r) {
  r.add("WarmupLR", warmup("WarmupLR", "warm-up from warmup_min_lr to warmup_max_lr, then constant",
                           "params (WarmupLR, WarmupDecayLR)", false));
  r.add("WarmupDecayLR", warmup("WarmupDecayLR", "WarmupLR, then linear decay to 0 at total_num_steps", "", true));
  SchedulerType cosine = builtin("WarmupCosineLR", "warm-up, then cosine decay of the optimizer's lr",
                                 "params (WarmupCosineLR)", &SchedulerOptions::cosine);
  cosine.resolve = [](SchedulerOptions& o, int64_t steps) -> std::string {
    if (o.cosine.total_num_steps > 0) return "";
    o.cosine.total_num_steps = steps;
    return c10::str("scheduler.params.total_num_steps = ", steps, " (from xtrain.steps)");
  };
  r.add("WarmupCosineLR", std::move(cosine));
  SchedulerType one_cycle = builtin("OneCycle", "one lr (and momentum) cycle, then decay", "params (OneCycle)",
                                    &SchedulerOptions::one_cycle);
  one_cycle.validate = [](const SchedulerOptions& o, std::vector<std::string>& errors) {
    if (!(o.one_cycle.cycle_min_lr >= 0 && o.one_cycle.cycle_max_lr >= 0)) {
      errors.emplace_back("config: scheduler.params.cycle_min_lr and cycle_max_lr are required for OneCycle");
    }
  };
  r.add("OneCycle", std::move(one_cycle));
  r.add("LRRangeTest", builtin("LRRangeTest", "lr grows from lr_range_test_min_lr (the LR range test)",
                               "params (LRRangeTest)", &SchedulerOptions::range_test));
  r.add("Adaptive", builtin("Adaptive", "xtrain: warm-up, then cuts the lr when the smoothed loss plateaus",
                            "params (Adaptive)", &SchedulerOptions::adaptive));
}

}  // namespace

Registry<SchedulerType>& scheduler_types() {
  static auto* r = new Registry<SchedulerType>("scheduler", add_builtins);  // never destroyed
  return *r;
}

std::string normalise_scheduler_type(const std::string& type) {
  if (type.empty()) return type;
  const std::vector<std::string> ours = scheduler_types().names();
  for (const auto& name : ours) {
    if (type == name) return name;
  }
  const std::string list = Registry<SchedulerType>::join(ours);
  const std::vector<std::string> torch_names = {"StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                                                "ReduceLROnPlateau", "CyclicLR", "LambdaLR", "LinearLR"};
  for (const auto& name : torch_names) {
    XTRAIN_USAGE_CHECK(type != name, "config: not supported yet: scheduler.type=\"", type, "\" (xtrain has ", list,
                       "; Adaptive reduces the lr on a plateau)");
  }
  XTRAIN_USAGE_ERROR("config: scheduler.type must be one of ", list, ", got \"", type, "\"",
                     did_you_mean_suffix(type, ours));
}

}  // namespace xtrain::config
