// The search space: one parameter per config key path, read from space.json, e.g.
//   {"optimizer.params.lr": {"type": "loguniform", "low": 1e-4, "high": 1e-2},
//    "scheduler.params.warmup_num_steps": {"type": "int", "low": 0, "high": 200},
//    "optimizer.type": {"type": "choice", "values": ["AdamW", "Lamb"]}}
// Samplers work in an encoded unit cube: one coordinate per numeric parameter (on a log scale
// where declared) and a one-hot block per choice; `decode` snaps any point to valid values.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xtrain/tune/rng.h"

namespace xtrain::tune {

enum class ParamType { kUniform, kLogUniform, kInt, kChoice };

struct Param {
  std::string key;  // config key path, e.g. "optimizer.params.lr"
  ParamType type = ParamType::kUniform;
  double low = 0.0, high = 1.0;         // uniform, loguniform, int (inclusive)
  bool log = false;                     // loguniform, or int with "log": true
  std::vector<nlohmann::json> choices;  // choice
  int64_t offset = 0;                   // first encoded coordinate
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

  Params sample(Rng& rng) const;  // uniform over each parameter's values (log-uniform where log)
  std::vector<double> encode(const Params& values) const;
  Params decode(const std::vector<double>& x) const;  // rounds ints, argmax over one-hot blocks
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
  int64_t dims_ = 0;
};

}  // namespace xtrain::tune
