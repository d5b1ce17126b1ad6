// The kernels the registry starts with (see registry.h for the list and their priorities).
// Internal to kernels/attention: registry.cpp calls this once, on first use.
#pragma once
#include <functional>
#include <string>

#include "xtrain/kernels/attention/registry.h"

namespace xtrain::kernels::attention {

using AddKernel = std::function<void(const std::string& name, AttentionImpl impl, AttentionSupports supports,
                                     AttentionPriority priority)>;
void add_builtin_kernels(const AddKernel& add);

}  // namespace xtrain::kernels::attention
