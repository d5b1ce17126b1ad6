// The search space: one parameter per config key path, read from space.json, e.g.
//   {"optimizer.params.lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2},
//    "scheduler.params.warmup_num_steps": {"type": "int", "low": 0, "high": 200},
//    "optimizer.type": {"type": "choice", "values": ["AdamW", "Lamb"]}}
// Samplers work in an encoded unit cube: one coordinate per numeric parameter (on a log scale
// where declared) and a one-hot block per choice; `decode` snaps any point to valid values.
// Architecture search adds (docs: README "Architecture search"):
//   "when": {"xtrain.model.attention.type": "multiscale"}  a conditional parameter: set only when
//       an earlier choice parameter has that value (or one of a list of values). An inactive
//       parameter is absent from the trial's values and overrides (the base config's value holds),
//       and its coordinates encode as 0: a fixed point, so the GP sees the same vector for trials
//       that differ only in a key they did not set.
//   "step": 32 (int)  values low, low + step, ..., high.
//   "$constraints": [[term, op, term], ...]  relations every trial meets (tune/constraint.h).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xtrain/tune/constraint.h"
#include "xtrain/tune/rng.h"

namespace xtrain::tune {

enum class ParamType { kUniform, kLogUniform, kInt, kChoice };

struct Param {
  std::string key;  // config key path, e.g. "optimizer.params.lr"
  ParamType type = ParamType::kUniform;
  double low = 0.0, high = 1.0;         // uniform, loguniform, int (inclusive)
  bool log = false;                     // loguniform, or int with "log": true
  std::vector<nlohmann::json> choices;  // choice
  int64_t step = 1;                     // int: spacing of the values from low
  struct Condition {
    size_t parent;                       // index of an earlier choice parameter
    std::vector<nlohmann::json> values;  // the parameter is active when the parent takes one of these
  };
  std::vector<Condition> when;  // all must hold; empty: always active
  int64_t offset = 0;           // first encoded coordinate
  int64_t width() const { return type == ParamType::kChoice ? static_cast<int64_t>(choices.size()) : 1; }
};

// Parameter values of one trial: {"optimizer.params.lr": 0.003, ...}.
using Params = nlohmann::json;

class SearchSpace {
 public:
  SearchSpace() = default;
  // Parses space.json text; errors name `origin` and the parameter.
  static SearchSpace parse(const std::string& text, const std::string& origin = "space.json");
  static SearchSpace load(const std::string& path);
  // Continuous box [low_i, high_i] named x0, x1, ... (benchmarks).
  static SearchSpace box(const std::vector<double>& low, const std::vector<double>& high);

  const std::vector<Param>& params() const { return params_; }
  int64_t dims() const { return dims_; }
  // The canonical JSON (what parse reads, in the same order), stored in study.json.
  nlohmann::ordered_json to_json() const;

  const std::vector<Constraint>& constraints() const { return constraints_; }

  // Uniform over each active parameter's values (log-uniform where log), redrawn until every
  // constraint holds; UsageError naming the constraints when 10000 draws all fail.
  Params sample(Rng& rng) const;
  std::vector<double> encode(const Params& values) const;  // inactive parameters: coordinates 0
  // Rounds ints, argmax over one-hot blocks, leaves out inactive parameters.
  Params decode(const std::vector<double>& x) const;
  // Whether `p`'s conditions hold for `values` (its parents' values).
  bool active(const Param& p, const Params& values) const;
  // Every constraint holds; `why` (optional) gets the first that does not.
  bool feasible(const Params& values, std::string* why = nullptr) const;
  bool feasible_point(const std::vector<double>& x) const { return feasible(decode(x)); }
  // Every parameter at one valid value (first choice, low), conditions ignored: to check that all
  // the space's keys are config keys.
  Params every_key() const;
  std::vector<double> snap(const std::vector<double>& x) const { return encode(decode(x)); }
  // Coordinates a local optimiser may move continuously (numeric parameters, not one-hot blocks).
  std::vector<bool> continuous_mask() const;

  // "key=<JSON value>" per parameter, for `xtrain train --set`.
  std::vector<std::string> overrides(const Params& values) const;
  // A short human form of one value for tables ("3.2e-03", "40", "AdamW").
  static std::string format(const nlohmann::json& value);

 private:
  void add(Param p);
  std::vector<Param> params_;
  std::vector<Constraint> constraints_;
  int64_t dims_ = 0;
};

}  // namespace xtrain::tune
