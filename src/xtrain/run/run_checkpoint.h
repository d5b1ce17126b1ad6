// A run's checkpoints: every rank saves its engine files (under its model-parallel scope), its
// sampler and RNG state, and rank 0 the config and the model-parallel manifest; resuming reads
// them back exactly. Also the fault injection the crash-safety tests use. Internal to run/.
#pragma once
#include <cstdint>
#include <string>

#include "xtrain/run/setup.h"

namespace xtrain {

// Every rank writes its part; after a barrier rank 0 commits the manifest (with the world size)
// and prunes. Until the commit, `latest` still names the previous checkpoint.
void save(Setup& s, const std::string& run_dir);
// The latest checkpoint of run_dir into the engine and the training loader.
void resume(Setup& s, const std::string& run_dir);

// XTRAIN_FAULT_AT_STEP=<k>:<rank> / XTRAIN_FAULT_IN_SAVE=<k>:<rank>[:mid]: that rank kills itself
// with SIGKILL after step k / while saving step k's checkpoint: after writing its files and before
// the commit, or with `:mid` right after its model and optimizer shards, before its other files
// (tests of elastic recovery and of crash-safe checkpoints; the launcher passes them to the first
// attempt only).
bool fault_due(const char* variable, int64_t step, int rank, const char* phase = "");

}  // namespace xtrain
