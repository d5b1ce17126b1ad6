// Constraints between the parameters of a search space, as "$constraints" in space.json:
//   "$constraints": [["xtrain.model.d_model", "multiple_of", "xtrain.model.heads"],
//                    ["len(xtrain.model.attention.windows)", "<=", "xtrain.model.heads"]]
// Each is [term, op, term]: a term is a parameter's key, len(key) of a list-valued choice, or a
// number; op is multiple_of, <=, <, >=, >, == or !=. A constraint naming an inactive parameter (a
// conditional key whose "when" does not hold) is satisfied. Samplers keep only points that meet
// every constraint (rejection), so a trial never receives a combination the model would refuse.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace xtrain::tune {

struct ConstraintTerm {
  std::string key;      // "" for a number
  bool length = false;  // len(key)
  double number = 0.0;
  std::string text;  // as written, for messages
};

struct Constraint {
  ConstraintTerm left, right;
  std::string op;
  // True when both terms have values in `params` and the relation holds, or a term's key is absent
  // (inactive). UsageError when a value has the wrong kind (len of a number, a string compared).
  bool holds(const nlohmann::json& params) const;
  std::string describe() const;  // "xtrain.model.d_model multiple_of xtrain.model.heads"
  nlohmann::json to_json() const;
};

// Parses the "$constraints" array; `keys` are the space's parameter keys (a term naming another key
// is an error naming it and the closest key), `origin` names the file.
std::vector<Constraint> parse_constraints(const nlohmann::ordered_json& spec, const std::vector<std::string>& keys,
                                          const std::string& origin);

}  // namespace xtrain::tune
