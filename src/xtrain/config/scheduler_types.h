// The scheduler types the config reader knows: name, params block, checks, and what the run length
// fills in. DeepSpeed's five schedules and xtrain's Adaptive are declared here, beside the reader;
// a schedule added with sched::register_schedule (sched/registry.h) also adds its config half here
// (config::scheduler_types().add), since sched/ and config/ are both L1 and may not include each other.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "xtrain/base/registry.h"
#include "xtrain/config/section_type.h"
#include "xtrain/sched/options.h"

namespace xtrain::config {

struct SchedulerType : SectionType<sched::SchedulerOptions> {
  // Fills values taken from the run length (xtrain.steps) when the file leaves them unset; returns
  // a note for the start-up lines, or "". Optional.
  std::function<std::string(sched::SchedulerOptions&, int64_t steps)> resolve;
};

// Names compare exactly, as DeepSpeed's do.
Registry<SchedulerType>& scheduler_types();

// "" stays "" (no schedule); a registered name is returned; else a UsageError naming scheduler.type.
std::string normalise_scheduler_type(const std::string& type);

// A type whose params struct P (with visit(V&)) lives in SchedulerOptions::custom.
template <class P>
SchedulerType custom_scheduler_type(const std::string& name, const std::string& description) {
  return custom_section_type<SchedulerType, P>(name, description);
}

}  // namespace xtrain::config
