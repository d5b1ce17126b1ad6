// The built-in models' registry entries (models/registry.h), with their capability hooks: gpt
// (every hook: sampling, incremental decoding (kv_cache.h), tracing shape, tiny smoke shape, tensor
// and pipeline parallelism, activation checkpointing), resnet18 and mlp (a sample shape for export only).
#pragma once
#include "xtrain/models/registry.h"

namespace xtrain::models {

ModelEntry gpt_entry();
ModelEntry resnet18_entry();
ModelEntry mlp_entry();

}  // namespace xtrain::models
