// One trial of a study as stored in STUDY/trials/<id>.json: its parameters, state, intermediate
// metric values as the trainer reported them (the metric's own sign), final value, error text and
// timings. A trial is running, complete, pruned (stopped early; value = its last reported value)
// or failed (never re-run; error = what went wrong, e.g. the tail of its stderr).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xtrain::tune {

enum class TrialState { kRunning, kComplete, kPruned, kFailed };

const char* state_name(TrialState state);
TrialState parse_state(const std::string& name);  // UsageError for an unknown name

struct Trial {
  int64_t id = 0;
  nlohmann::json params = nlohmann::json::object();  // config key path -> value
  TrialState state = TrialState::kRunning;
  std::vector<std::pair<int64_t, double>> intermediate;  // (step, metric) in report order
  std::optional<double> value;                           // complete: final; pruned: last reported
  std::optional<double> objective2;      // --objective2 (parameters, latency ms): complete trials
  std::vector<double> rungs;             // ASHA: the (minimisation-signed) value recorded at each rung reached
  std::string error;                     // failed: the cause; pruned: the pruner's reason
  int64_t attempt = 0;                   // launches so far (> 1 after a resume re-ran it)
  double started = 0.0, finished = 0.0;  // unix seconds

  double seconds() const { return finished > started ? finished - started : 0.0; }
  int64_t last_step() const { return intermediate.empty() ? 0 : intermediate.back().first; }
};

nlohmann::json to_json(const Trial& trial);
Trial trial_from_json(const nlohmann::json& j, const std::string& origin);

// "0007": trial ids are zero-padded so file listings sort in order.
std::string trial_name(int64_t id);

}  // namespace xtrain::tune
