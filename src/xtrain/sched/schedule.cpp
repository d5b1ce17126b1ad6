// make_schedule: asks the schedule registry (registry.h) for SchedulerOptions::type; the entries
// check the values their formulas need (the config reader checks some too; the library may be used
// without it). Type "" is a constant lr.
#include "xtrain/sched/schedule.h"

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"
#include "xtrain/base/registry.h"
#include "xtrain/sched/registry.h"

namespace xtrain::sched {

namespace {

class ConstantSchedule final : public Schedule {
 public:
  explicit ConstantSchedule(double lr) : lr_(lr) {}
  double lr_after(int64_t) const override { return lr_; }

 private:
  double lr_;
};

Registry<ScheduleEntry>& table() {
  static auto* r = new Registry<ScheduleEntry>("scheduler", [](Registry<ScheduleEntry>& reg) {
    for (auto& e : builtin_schedules()) {
      const std::string name = e.name;
      reg.add(name, std::move(e));
    }
  });  // never destroyed
  return *r;
}

}  // namespace

void register_schedule(ScheduleEntry entry) {
  XTRAIN_USAGE_CHECK(!entry.name.empty() && entry.make, "sched: register_schedule needs a name and a factory (\"",
                     entry.name, "\")");
  const std::string name = entry.name;
  table().add(name, std::move(entry));
}

bool unregister_schedule(const std::string& name) { return table().remove(name); }

const ScheduleEntry& find_schedule(const std::string& type) {
  if (const ScheduleEntry* e = table().lookup(type)) return *e;
  const auto names = table().names();
  XTRAIN_USAGE_ERROR("sched: unknown scheduler type \"", type, "\"; expected one of ", Registry<ScheduleEntry>::join(names),
                     did_you_mean_suffix(type, names), " (scheduler.type)");
}

std::vector<std::string> schedule_names() { return table().names(); }

std::unique_ptr<Schedule> make_schedule(const SchedulerOptions& o, double base_lr) {
  if (o.type.empty()) return std::make_unique<ConstantSchedule>(base_lr);
  return find_schedule(o.type).make(o, base_lr);
}

}  // namespace xtrain::sched
