// Run directories and the trainer's own resumable state: where a run lives, the resolved config
// written beside it, and the RNG / sampler state stored in each checkpoint (trainer.json).
#pragma once
#include <string>

#include "xtrain/base/file_io.h"  // read_file, write_file_atomic: callers of this header use them
#include "xtrain/data/sampler.h"

namespace xtrain {

// <output>/<name>, name defaulting to <model>-<YYYYmmdd-HHMMSS>.
std::string new_run_dir_name(const std::string& output, const std::string& name, const std::string& model_type);
// The most recently modified run directory under `output` that has checkpoints, or "".
std::string latest_run_dir(const std::string& output);

// trainer.json: {"sampler": {epoch, position}, "rng": hex of the CPU generator state}
std::string trainer_state_json(const data::SamplerState& sampler);
// Restores the CPU generator and returns the sampler state.
data::SamplerState restore_trainer_state(const std::string& json);

}  // namespace xtrain
