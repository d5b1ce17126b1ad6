// Value checks on a read config (ranges, combinations); each failure appends a message naming its key.
#pragma once
#include <string>
#include <vector>

#include "xtrain/config/config.h"

namespace xtrain::config {

void validate(const Config& config, std::vector<std::string>& errors);

}  // namespace xtrain::config
