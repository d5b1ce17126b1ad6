// XTRAIN_SMOKE=1: every command runs its tiniest meaningful version, so a test can run each
// command of the README in seconds (tests/e2e/readme_commands.py). Design choice: the shrinking is
// expressed as --set overrides appended after the user's (so the resolved config.json shows what
// ran, and the ordinary validation checks them), computed from the config as first loaded so they
// respect what the user's config requires (pipeline stages, tensor-parallel size, windows).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/config/config.h"

namespace xtrain::smoke {

// XTRAIN_SMOKE is "1"/"true"/"on" (off when unset, empty, "0", "false" or "off"); any other value
// is a UsageError naming the variable.
bool enabled();

// With smoke on: `tiny` when value <= 0 (0 meaning "all"), else min(value, tiny); otherwise value.
int64_t cap(int64_t value, int64_t tiny);

// The overrides that shrink a training run whose config loaded as `loaded` (the user's --set
// already applied; `user` lists them). A fresh run: 2 steps, micro-batch 2, eval 1 batch at the
// end, a checkpoint at the end, a 16-byte sample, and a GPT of max(1, pipeline.stages) layers
// with min(heads, 4) heads raised to cover the multi-scale windows and rounded to the
// tensor-parallel size (16 wide each), context min(seq_len, 64) unless `user` sets
// xtrain.model.seq_len; an lr range test (`lr_sweep`, --find-lr) 10 steps (it needs 5 points).
// A resumed run (the model is the checkpoint's): 2 more steps, nothing else.
std::vector<std::string> train_overrides(const config::Config& loaded, const std::vector<std::string>& user,
                                         bool resumed, bool lr_sweep = false);

}  // namespace xtrain::smoke
