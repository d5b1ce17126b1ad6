// Trial <-> JSON. Non-finite numbers are stored as null (JSON has no NaN).
#include "xtrain/tune/trial.h"

#include <cmath>
#include <cstdio>

#include "xtrain/base/error.h"

namespace xtrain::tune {
namespace {

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

const char* state_name(TrialState state) {
  switch (state) {
    case TrialState::kRunning:
      return "running";
    case TrialState::kComplete:
      return "complete";
    case TrialState::kPruned:
      return "pruned";
    case TrialState::kFailed:
      return "failed";
  }
  return "?";
}

TrialState parse_state(const std::string& name) {
  for (auto s : {TrialState::kRunning, TrialState::kComplete, TrialState::kPruned, TrialState::kFailed})
    if (name == state_name(s)) return s;
  XTRAIN_USAGE_ERROR("tune: unknown trial state '", name, "' (running, complete, pruned, failed)");
}

std::string trial_name(int64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04lld", static_cast<long long>(id));
  return buf;
}

nlohmann::json to_json(const Trial& t) {
  nlohmann::json inter = nlohmann::json::array();
  for (const auto& [step, v] : t.intermediate) inter.push_back({step, number_or_null(v)});
  nlohmann::json rungs = nlohmann::json::array();
  for (double r : t.rungs) rungs.push_back(number_or_null(r));
  nlohmann::json j = {{"id", t.id},
                      {"state", state_name(t.state)},
                      {"params", t.params},
                      {"value", t.value ? number_or_null(*t.value) : nlohmann::json(nullptr)},
                      {"step", t.last_step()},
                      {"intermediate", inter},
                      {"rungs", rungs},
                      {"error", t.error},
                      {"attempt", t.attempt},
                      {"started", t.started},
                      {"finished", t.finished},
                      {"seconds", t.seconds()}};
  if (t.objective2) j["objective2"] = number_or_null(*t.objective2);
  return j;
}

Trial trial_from_json(const nlohmann::json& j, const std::string& origin) {
  Trial t;
  try {
    t.id = j.at("id").get<int64_t>();
    t.state = parse_state(j.at("state").get<std::string>());
    t.params = j.at("params");
    if (!j.at("value").is_null()) t.value = j.at("value").get<double>();
    for (const auto& e : j.at("intermediate"))
      t.intermediate.emplace_back(e.at(0).get<int64_t>(), e.at(1).is_null() ? NAN : e.at(1).get<double>());
    for (const auto& r : j.value("rungs", nlohmann::json::array()))
      t.rungs.push_back(r.is_null() ? NAN : r.get<double>());
    if (j.contains("objective2") && !j.at("objective2").is_null()) t.objective2 = j.at("objective2").get<double>();
    t.error = j.value("error", "");
    t.attempt = j.value("attempt", 0);
    t.started = j.value("started", 0.0);
    t.finished = j.value("finished", 0.0);
  } catch (const nlohmann::json::exception& e) {
    XTRAIN_USAGE_ERROR("tune: ", origin, " is not a trial record: ", e.what());
  }
  return t;
}

}  // namespace xtrain::tune
