// The schedule registry: name -> factory of a Schedule from SchedulerOptions and the optimizer's lr.
// make_schedule asks it; built-ins (DeepSpeed's WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle,
// LRRangeTest, and xtrain's Adaptive: builtin_schedules.cpp) are added on first use. A schedule
// with its own params also registers its config half with config::scheduler_types().add (sched/
// and config/ are both L1; the caller, above both, makes the two calls).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/sched/options.h"
#include "xtrain/sched/schedule.h"

namespace xtrain::sched {

struct ScheduleEntry {
  std::string name;
  std::string description;
  // Builds the schedule, checking the values its formulas need (UsageError naming
  // scheduler.params.<key>). base_lr: the optimizer's configured lr.
  std::function<std::unique_ptr<Schedule>(const SchedulerOptions&, double base_lr)> make;
};

void register_schedule(ScheduleEntry entry);  // replaces an entry of that name
bool unregister_schedule(const std::string& name);
// A UsageError naming scheduler.type, the closest name and the list when `type` is unknown.
const ScheduleEntry& find_schedule(const std::string& type);
std::vector<std::string> schedule_names();

// The built-in entries (builtin_schedules.cpp).
std::vector<ScheduleEntry> builtin_schedules();

}  // namespace xtrain::sched
