// space.json parsing with errors that name the file, the parameter and the offending field, and
// the unit-cube encoding. Ints map v ↦ (v - low)/(high - low) (log of each side when log) and
// round back (to the step grid); random sampling draws ints uniformly from their values, not from
// the cube. Conditions refer to earlier parameters, so decoding in order sees each parent first.
#include "xtrain/tune/space.h"

#include <c10/util/Exception.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "xtrain/base/did_you_mean.h"
#include "xtrain/base/error.h"

namespace xtrain::tune {
namespace {

const std::vector<std::string> kTypes = {"uniform", "loguniform", "int", "choice"};

double number_field(const nlohmann::ordered_json& spec, const char* field, const std::string& where) {
  XTRAIN_USAGE_CHECK(spec.contains(field), "tune: ", where, " needs \"", field, "\"");
  XTRAIN_USAGE_CHECK(spec[field].is_number(), "tune: ", where, ".", field, " must be a number, got ",
                     spec[field].dump());
  return spec[field].get<double>();
}

bool contains(const std::vector<nlohmann::json>& values, const nlohmann::json& v) {
  for (const auto& c : values)
    if (c == v) return true;
  return false;
}

// "when": {"parent.key": value or [values]}: the parent is an earlier choice parameter, each value
// one of its choices. A list that is itself one of the choices (windows [8, 32]) is one value.
std::vector<Param::Condition> parse_when(const nlohmann::ordered_json& spec, const std::vector<Param>& earlier,
                                         const std::string& where) {
  XTRAIN_USAGE_CHECK(spec.is_object() && !spec.empty(), where,
                     ".when must be an object like {\"xtrain.model.attention.type\": \"multiscale\"}, got ",
                     spec.dump());
  std::vector<std::string> names;
  for (const auto& e : earlier) names.push_back(e.key);
  std::vector<Param::Condition> out;
  for (const auto& [parent_key, wanted] : spec.items()) {
    size_t parent = earlier.size();
    for (size_t i = 0; i < earlier.size(); ++i)
      if (earlier[i].key == parent_key) parent = i;
    XTRAIN_USAGE_CHECK(parent < earlier.size(), where, ".when names \"", parent_key,
                       "\", which is not a parameter declared before it", did_you_mean_suffix(parent_key, names),
                       " (a condition refers to an earlier choice parameter)");
    const Param& pp = earlier[parent];
    XTRAIN_USAGE_CHECK(pp.type == ParamType::kChoice, where, ".when names \"", parent_key,
                       "\", which is not a choice parameter (conditions test a choice's value)");
    const auto w = nlohmann::json::parse(wanted.dump());
    Param::Condition c{parent, {}};
    if (contains(pp.choices, w) || !w.is_array()) {
      c.values.push_back(w);
    } else {
      for (const auto& v : w) c.values.push_back(v);
    }
    for (const auto& v : c.values) {
      XTRAIN_USAGE_CHECK(contains(pp.choices, v), where, ".when: \"", parent_key, "\" never takes ", v.dump(),
                         " (its values: ", nlohmann::json(pp.choices).dump(), ")");
    }
    out.push_back(std::move(c));
  }
  return out;
}

Param parse_param(const std::string& key, const nlohmann::ordered_json& spec, const std::string& origin,
                  const std::vector<Param>& earlier) {
  const std::string where = origin + ": \"" + key + "\"";
  XTRAIN_USAGE_CHECK(!key.empty() && key.front() != '.' && key.back() != '.' && key.find("..") == std::string::npos,
                     "tune: ", origin, ": \"", key, "\" is not a config key path (like optimizer.params.lr)");
  XTRAIN_USAGE_CHECK(spec.is_object(), "tune: ", where, " must be an object like {\"type\": \"uniform\", ...}, got ",
                     spec.dump());
  XTRAIN_USAGE_CHECK(spec.contains("type") && spec["type"].is_string(), "tune: ", where,
                     " needs \"type\": one of uniform, loguniform, int, choice");
  const std::string type = spec["type"].get<std::string>();
  Param p;
  p.key = key;
  std::vector<std::string> allowed = {"type", "when"};
  if (spec.contains("when")) p.when = parse_when(spec["when"], earlier, "tune: " + where);
  if (type == "choice") {
    p.type = ParamType::kChoice;
    allowed.push_back("values");
    XTRAIN_USAGE_CHECK(spec.contains("values") && spec["values"].is_array() && !spec["values"].empty(), "tune: ", where,
                       " (choice) needs a non-empty \"values\" array");
    for (const auto& v : spec["values"]) p.choices.push_back(nlohmann::json::parse(v.dump()));
  } else {
    XTRAIN_USAGE_CHECK(type == "uniform" || type == "loguniform" || type == "int", "tune: ", where, ": unknown type \"",
                       type, "\"", did_you_mean_suffix(type, kTypes), "; use uniform, loguniform, int or choice");
    p.type = type == "uniform" ? ParamType::kUniform : type == "loguniform" ? ParamType::kLogUniform : ParamType::kInt;
    allowed.insert(allowed.end(), {"low", "high"});
    p.low = number_field(spec, "low", where);
    p.high = number_field(spec, "high", where);
    p.log = p.type == ParamType::kLogUniform;
    if (p.type == ParamType::kInt) {
      allowed.insert(allowed.end(), {"log", "step"});
      if (spec.contains("log")) {
        XTRAIN_USAGE_CHECK(spec["log"].is_boolean(), "tune: ", where, ".log must be true or false");
        p.log = spec["log"].get<bool>();
      }
      XTRAIN_USAGE_CHECK(p.low == std::round(p.low) && p.high == std::round(p.high), "tune: ", where,
                         " (int) needs integer bounds, got [", p.low, ", ", p.high, "]");
      if (spec.contains("step")) {
        XTRAIN_USAGE_CHECK(spec["step"].is_number_integer() && spec["step"].get<int64_t>() > 0, "tune: ", where,
                           ".step must be a positive integer, got ", spec["step"].dump());
        p.step = spec["step"].get<int64_t>();
        XTRAIN_USAGE_CHECK(static_cast<int64_t>(p.high - p.low) % p.step == 0, "tune: ", where, ": high - low (",
                           p.high - p.low, ") must be a multiple of step (", p.step, ")");
      }
    }
    XTRAIN_USAGE_CHECK(p.low < p.high, "tune: ", where, " needs low < high, got low ", p.low, ", high ", p.high);
    XTRAIN_USAGE_CHECK(!p.log || p.low > 0, "tune: ", where, " is on a log scale and needs low > 0, got ", p.low);
  }
  for (const auto& [field, value] : spec.items()) {
    (void)value;
    bool known = false;
    for (const auto& a : allowed) known = known || a == field;
    XTRAIN_USAGE_CHECK(known, "tune: ", where, ": unknown field \"", field, "\"", did_you_mean_suffix(field, allowed),
                       " (", type, " takes: ", c10::Join(", ", allowed), ")");
  }
  return p;
}

double to_unit(const Param& p, double v) {
  if (p.log) return (std::log(v) - std::log(p.low)) / (std::log(p.high) - std::log(p.low));
  return (v - p.low) / (p.high - p.low);
}

double from_unit(const Param& p, double u) {
  u = std::min(1.0, std::max(0.0, u));
  double v =
      p.log ? std::exp(std::log(p.low) + u * (std::log(p.high) - std::log(p.low))) : p.low + u * (p.high - p.low);
  if (p.type == ParamType::kInt) v = p.low + static_cast<double>(p.step) * std::round((v - p.low) / p.step);
  return std::min(p.high, std::max(p.low, v));
}

}  // namespace

void SearchSpace::add(Param p) {
  p.offset = dims_;
  dims_ += p.width();
  params_.push_back(std::move(p));
}

SearchSpace SearchSpace::parse(const std::string& text, const std::string& origin) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    XTRAIN_USAGE_ERROR("tune: ", origin, " is not valid JSON: ", e.what());
  }
  XTRAIN_USAGE_CHECK(j.is_object() && !j.empty(), "tune: ", origin,
                     " must be a non-empty object {\"config.key\": {\"type\": ...}, ...}");
  SearchSpace s;
  for (const auto& [key, spec] : j.items())
    if (key != "$constraints") s.add(parse_param(key, spec, origin, s.params_));
  XTRAIN_USAGE_CHECK(!s.params_.empty(), "tune: ", origin, " has constraints but no parameters");
  if (j.contains("$constraints")) {
    std::vector<std::string> keys;
    for (const auto& p : s.params_) keys.push_back(p.key);
    s.constraints_ = parse_constraints(j["$constraints"], keys, origin);
  }
  return s;
}

SearchSpace SearchSpace::load(const std::string& path) {
  std::ifstream in(path);
  XTRAIN_USAGE_CHECK(in.good(), "tune: cannot read the search space '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

SearchSpace SearchSpace::box(const std::vector<double>& low, const std::vector<double>& high) {
  SearchSpace s;
  for (size_t i = 0; i < low.size(); ++i) {
    Param p;
    p.key = "x" + std::to_string(i);
    p.low = low[i];
    p.high = high[i];
    s.add(p);
  }
  return s;
}

nlohmann::ordered_json SearchSpace::to_json() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& p : params_) {
    nlohmann::ordered_json spec = {{"type", kTypes[static_cast<size_t>(p.type)]}};
    if (p.type == ParamType::kChoice) {
      spec["values"] = nlohmann::ordered_json::parse(nlohmann::json(p.choices).dump());
    } else {
      spec["low"] = p.low;
      spec["high"] = p.high;
      if (p.type == ParamType::kInt) spec["log"] = p.log;
      if (p.step != 1) spec["step"] = p.step;
    }
    for (const auto& c : p.when) {
      const auto values = nlohmann::ordered_json::parse(nlohmann::json(c.values).dump());
      spec["when"][params_[c.parent].key] = c.values.size() == 1 && !c.values[0].is_array() ? values[0] : values;
    }
    out[p.key] = spec;
  }
  if (!constraints_.empty()) {
    out["$constraints"] = nlohmann::ordered_json::array();
    for (const auto& c : constraints_) out["$constraints"].push_back(nlohmann::ordered_json::parse(c.to_json().dump()));
  }
  return out;
}

Params SearchSpace::sample(Rng& rng) const {
  for (int attempt = 0; attempt < 10000; ++attempt) {
    Params out = Params::object();
    for (const auto& p : params_) {
      if (!active(p, out)) continue;
      if (p.type == ParamType::kChoice) {
        out[p.key] = p.choices[static_cast<size_t>(rng.integer(p.width()))];
      } else if (p.type == ParamType::kInt && !p.log) {
        const int64_t values = static_cast<int64_t>(p.high - p.low) / p.step + 1;
        out[p.key] = static_cast<int64_t>(p.low) + p.step * rng.integer(values);
      } else if (p.type == ParamType::kInt) {
        // Log-uniform over [low - ½, high + ½) then rounded: each integer's share follows the log density.
        const double lo = std::log(std::max(p.low - 0.5, 0.5)), hi = std::log(p.high + 0.5);
        out[p.key] = static_cast<int64_t>(from_unit(p, to_unit(p, std::exp(rng.uniform(lo, hi)))));
      } else {
        out[p.key] = from_unit(p, rng.uniform());
      }
    }
    if (feasible(out)) return out;
  }
  std::vector<std::string> all;
  for (const auto& c : constraints_) all.push_back(c.describe());
  XTRAIN_USAGE_ERROR("tune: 10000 random draws all broke a constraint (", c10::Join("; ", all),
                     "): the space has (almost) no valid point; widen the ranges or drop a constraint");
}

bool SearchSpace::active(const Param& p, const Params& values) const {
  for (const auto& c : p.when) {
    const auto& parent = params_[c.parent].key;
    if (!values.contains(parent) || !contains(c.values, values.at(parent))) return false;
  }
  return true;
}

bool SearchSpace::feasible(const Params& values, std::string* why) const {
  for (const auto& c : constraints_) {
    if (c.holds(values)) continue;
    if (why) *why = c.describe();
    return false;
  }
  return true;
}

Params SearchSpace::every_key() const {
  Params out = Params::object();
  for (const auto& p : params_) {
    if (p.type == ParamType::kChoice) {
      out[p.key] = p.choices.front();
    } else if (p.type == ParamType::kInt) {
      out[p.key] = static_cast<int64_t>(p.low);
    } else {
      out[p.key] = p.low;
    }
  }
  return out;
}

std::vector<double> SearchSpace::encode(const Params& values) const {
  std::vector<double> x(static_cast<size_t>(dims_), 0.0);
  for (const auto& p : params_) {
    if (!active(p, values)) continue;  // a fixed point: all coordinates 0
    XTRAIN_USAGE_CHECK(values.contains(p.key), "tune: parameters lack \"", p.key, "\": ", values.dump());
    const auto& v = values.at(p.key);
    if (p.type == ParamType::kChoice) {
      size_t index = p.choices.size();
      for (size_t c = 0; c < p.choices.size(); ++c)
        if (p.choices[c] == v) index = c;
      XTRAIN_USAGE_CHECK(index < p.choices.size(), "tune: \"", p.key, "\" = ", v.dump(), " is not one of its values");
      x[p.offset + index] = 1.0;
    } else {
      XTRAIN_USAGE_CHECK(v.is_number(), "tune: \"", p.key, "\" must be a number, got ", v.dump());
      x[p.offset] = to_unit(p, v.get<double>());
    }
  }
  return x;
}

Params SearchSpace::decode(const std::vector<double>& x) const {
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(x.size()) == dims_, "decode: ", x.size(), " coordinates for ", dims_);
  Params out = Params::object();
  for (const auto& p : params_) {
    if (!active(p, out)) continue;
    if (p.type == ParamType::kChoice) {
      int64_t best = 0;
      for (int64_t c = 1; c < p.width(); ++c)
        if (x[p.offset + c] > x[p.offset + best]) best = c;
      out[p.key] = p.choices[static_cast<size_t>(best)];
    } else if (p.type == ParamType::kInt) {
      out[p.key] = static_cast<int64_t>(from_unit(p, x[p.offset]));
    } else {
      out[p.key] = from_unit(p, x[p.offset]);
    }
  }
  return out;
}

std::vector<bool> SearchSpace::continuous_mask() const {
  std::vector<bool> mask(static_cast<size_t>(dims_), false);
  for (const auto& p : params_)
    if (p.type != ParamType::kChoice) mask[p.offset] = true;
  return mask;
}

std::vector<std::string> SearchSpace::overrides(const Params& values) const {
  std::vector<std::string> out;
  for (const auto& p : params_)
    if (values.contains(p.key)) out.push_back(p.key + "=" + values.at(p.key).dump());
  return out;
}

std::string SearchSpace::format(const nlohmann::json& value) {
  if (value.is_number_float()) {
    const double v = value.get<double>();
    char buf[32];
    const double a = std::abs(v);
    std::snprintf(buf, sizeof buf, (a != 0 && (a < 1e-2 || a >= 1e4)) ? "%.2e" : "%.4g", v);
    return buf;
  }
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

}  // namespace xtrain::tune
