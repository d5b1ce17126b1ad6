// A plan as `xtrain plan` prints it: a table (one row per layout, memory per rank and step time
// split into its parts, the recommendation) followed by the model's assumptions, or the same as
// JSON (bytes, seconds, tokens/s: unrounded, for scripts such as bench/multi_node.sh).
#pragma once
#include <string>
#include <vector>

#include "xtrain/plan/cost_model.h"

namespace xtrain::plan {

// The model's assumptions, one sentence each, with this cluster's and setup's numbers.
std::vector<std::string> assumptions(const Cluster& c, const Training& t);

std::string format_text(const Plan& plan, const ModelShape& m, const Cluster& c, const Training& t);
std::string format_json(const Plan& plan, const ModelShape& m, const Cluster& c, const Training& t);

}  // namespace xtrain::plan
