// Every check `xtrain train` makes on a config before any work: the config layer's own (config::load)
// plus those that need other areas (ZeRO's supported combinations, the precision policy on this
// build, the loss, the schedule, the curriculum, the monitors, model/data/parallelism agreement).
// `xtrain train` and `xtrain config` both call check_run_config, so `config` rejects what `train`
// would reject, with the same messages.
#pragma once
#include "xtrain/comm/rank_info.h"
#include "xtrain/config/config.h"

namespace xtrain {

// Throws one UsageError listing every problem (each naming its key); returns if there is none.
void check_run_config(const config::Config& config);

}  // namespace xtrain
