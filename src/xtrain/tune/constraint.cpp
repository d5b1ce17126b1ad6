// Constraint terms and relations. multiple_of compares integers exactly (d_model % heads == 0);
// the other relations compare as doubles.
#include "xtrain/tune/constraint.h"

#include <cmath>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"

namespace xtrain::tune {
namespace {

const std::vector<std::string> kOps = {"multiple_of", "<=", "<", ">=", ">", "==", "!="};

ConstraintTerm parse_term(const nlohmann::ordered_json& t, const std::vector<std::string>& keys,
                          const std::string& where) {
  ConstraintTerm term;
  if (t.is_number()) {
    term.number = t.get<double>();
    term.text = t.dump();
    return term;
  }
  XTRAIN_USAGE_CHECK(t.is_string(), "tune: ", where, ": a term must be a parameter key, \"len(key)\" or a number, got ",
                     t.dump());
  term.text = t.get<std::string>();
  term.key = term.text;
  if (term.key.rfind("len(", 0) == 0 && term.key.back() == ')') {
    term.length = true;
    term.key = term.key.substr(4, term.key.size() - 5);
  }
  bool known = false;
  for (const auto& k : keys) known = known || k == term.key;
  XTRAIN_USAGE_CHECK(known, "tune: ", where, ": \"", term.key, "\" is not a parameter of the space",
                     did_you_mean_suffix(term.key, keys), " (a constraint relates the space's own keys)");
  return term;
}

double value_of(const ConstraintTerm& t, const nlohmann::json& params, const std::string& what) {
  if (t.key.empty()) return t.number;
  const auto& v = params.at(t.key);
  if (t.length) {
    XTRAIN_USAGE_CHECK(v.is_array(), "tune: constraint ", what, ": len(", t.key, ") needs a list value, got ",
                       v.dump());
    return static_cast<double>(v.size());
  }
  XTRAIN_USAGE_CHECK(v.is_number(), "tune: constraint ", what, ": \"", t.key, "\" needs a number, got ", v.dump(),
                     " (use len(", t.key, ") for a list's length)");
  return v.get<double>();
}

}  // namespace

bool Constraint::holds(const nlohmann::json& params) const {
  for (const auto* t : {&left, &right})
    if (!t->key.empty() && !params.contains(t->key)) return true;  // an inactive parameter
  const double a = value_of(left, params, describe()), b = value_of(right, params, describe());
  if (op == "multiple_of") {
    const auto ia = static_cast<int64_t>(std::llround(a)), ib = static_cast<int64_t>(std::llround(b));
    return ib != 0 && ia % ib == 0;
  }
  if (op == "<=") return a <= b;
  if (op == "<") return a < b;
  if (op == ">=") return a >= b;
  if (op == ">") return a > b;
  if (op == "==") return a == b;
  return a != b;
}

std::string Constraint::describe() const { return left.text + " " + op + " " + right.text; }

nlohmann::json Constraint::to_json() const {
  auto term = [](const ConstraintTerm& t) { return t.key.empty() ? nlohmann::json(t.number) : nlohmann::json(t.text); };
  return nlohmann::json::array({term(left), op, term(right)});
}

std::vector<Constraint> parse_constraints(const nlohmann::ordered_json& spec, const std::vector<std::string>& keys,
                                          const std::string& origin) {
  XTRAIN_USAGE_CHECK(spec.is_array(), "tune: ", origin, ": \"$constraints\" must be an array of [term, op, term], got ",
                     spec.dump());
  std::vector<Constraint> out;
  for (size_t i = 0; i < spec.size(); ++i) {
    const auto& c = spec[i];
    const std::string where = origin + ": $constraints[" + std::to_string(i) + "]";
    XTRAIN_USAGE_CHECK(c.is_array() && c.size() == 3 && c[1].is_string(), "tune: ", where,
                       " must be [term, op, term], e.g. [\"xtrain.model.d_model\", \"multiple_of\", "
                       "\"xtrain.model.heads\"], got ",
                       c.dump());
    Constraint k;
    k.op = c[1].get<std::string>();
    bool known = false;
    for (const auto& o : kOps) known = known || o == k.op;
    XTRAIN_USAGE_CHECK(known, "tune: ", where, ": unknown relation \"", k.op, "\"", did_you_mean_suffix(k.op, kOps),
                       " (use multiple_of, <=, <, >=, >, == or !=)");
    k.left = parse_term(c[0], keys, where);
    k.right = parse_term(c[2], keys, where);
    XTRAIN_USAGE_CHECK(!k.left.key.empty() || !k.right.key.empty(), "tune: ", where,
                       " relates two numbers; name a parameter");
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace xtrain::tune
