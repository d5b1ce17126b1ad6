// The schedule registry: make_schedule asks it, unknown names fail naming scheduler.type, and a
// schedule added at run time (its factory here, its config half in config::scheduler_types) is
// read from a ds_config and computes its closed form.
#include <gtest/gtest.h>

#include <any>
#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/config/config.h"
#include "xtrain/config/scheduler_types.h"
#include "xtrain/sched/registry.h"

namespace xtrain::registry_test {
namespace {

struct HalvingParams {
  double factor = 0.5;
  template <class V>
  void visit(V& v) {
    v("factor", factor, "lr multiplier per step");
  }
};

class Halving final : public sched::Schedule {
 public:
  Halving(double base, double factor) : base_(base), factor_(factor) {}
  double lr_after(int64_t n) const override { return base_ * std::pow(factor_, static_cast<double>(n)); }

 private:
  double base_, factor_;
};

TEST(ScheduleRegistry, BuiltinsAndAnAddedSchedule) {
  EXPECT_EQ(sched::schedule_names(), (std::vector<std::string>{"WarmupLR", "WarmupDecayLR", "WarmupCosineLR",
                                                               "OneCycle", "LRRangeTest", "Adaptive"}));
  try {
    sched::find_schedule("WarmupLr");
    ADD_FAILURE() << "unknown schedule";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'WarmupLR'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(scheduler.type)"), std::string::npos) << e.what();
  }
  sched::register_schedule({"Halving", "lr * factor^n (test only)", [](const sched::SchedulerOptions& o, double lr) {
                              const auto* p = std::any_cast<HalvingParams>(&o.custom);
                              return std::make_unique<Halving>(lr, p ? p->factor : HalvingParams{}.factor);
                            }});
  config::scheduler_types().add("Halving", config::custom_scheduler_type<HalvingParams>("Halving", "test only"));
  const auto cfg = config::load_text(R"({"optimizer": {"type": "SGD", "params": {"lr": 0.1}},
      "scheduler": {"type": "Halving", "params": {"factor": 0.25}}})", {}).config;
  const auto s = sched::make_schedule(cfg.scheduler, cfg.optimizer.lr());
  EXPECT_DOUBLE_EQ(s->lr_after(0), 0.1);
  EXPECT_DOUBLE_EQ(s->lr_after(3), 0.1 * 0.25 * 0.25 * 0.25);
  EXPECT_TRUE(sched::unregister_schedule("Halving"));
  EXPECT_TRUE(config::scheduler_types().remove("Halving"));
  EXPECT_THROW(sched::make_schedule(cfg.scheduler, 0.1), UsageError);
}

}  // namespace
}  // namespace xtrain::registry_test
