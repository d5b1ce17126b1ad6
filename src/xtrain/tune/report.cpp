// Tables and end-of-study files. Parameter columns use the key's last segment ("lr",
// "warmup_num_steps") unless two parameters share it, then the whole key path.
#include "xtrain/tune/report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/base/log.h"
#include "xtrain/config/config.h"
#include "xtrain/monitor/jsonl_sink.h"
#include "xtrain/monitor/progress.h"
#include "xtrain/tune/pareto.h"
#include "xtrain/tune/study_store.h"

namespace xtrain::tune {
namespace fs = std::filesystem;
namespace {

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string format_number(std::optional<double> v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.5g", *v);
  return buf;
}

// Best complete value so far after each trial (NaN until the first complete one).
std::vector<double> best_so_far(const std::vector<Trial>& trials, double sign) {
  std::vector<double> out;
  double best = NAN;
  for (const auto& t : trials) {
    if (t.state == TrialState::kComplete && t.value && std::isfinite(*t.value) &&
        (std::isnan(best) || sign * *t.value < sign * best))
      best = *t.value;
    out.push_back(best);
  }
  return out;
}

}  // namespace

TrialTable::TrialTable(const SearchSpace& space, std::string metric, std::string objective2)
    : metric_(std::move(metric)), objective2_(std::move(objective2)) {
  std::map<std::string, int> count;
  for (const auto& p : space.params()) ++count[p.key.substr(p.key.rfind('.') + 1)];
  for (const auto& p : space.params()) {
    const auto last = p.key.substr(p.key.rfind('.') + 1);
    keys_.push_back(p.key);
    labels_.push_back(count[last] > 1 ? p.key : last);
  }
}

std::string TrialTable::header() const {
  std::string h = pad("trial", 6) + pad("state", 9) + pad(metric_, std::max<size_t>(11, metric_.size() + 1)) +
                  pad("step", 7) + pad("time", 8);
  if (!objective2_.empty()) h += pad(objective2_, std::max<size_t>(11, objective2_.size() + 1));
  for (const auto& l : labels_) h += pad(l, std::max<size_t>(10, l.size() + 1));
  return h;
}

std::string TrialTable::row(const Trial& t) const {
  std::string r = pad(trial_name(t.id), 6) + pad(state_name(t.state), 9) +
                  pad(format_number(t.value), std::max<size_t>(11, metric_.size() + 1)) +
                  pad(t.intermediate.empty() ? "-" : std::to_string(t.last_step()), 7) +
                  pad(t.finished > 0 ? monitor::format_duration(t.seconds()) : "-", 8);
  if (!objective2_.empty()) r += pad(format_number(t.objective2), std::max<size_t>(11, objective2_.size() + 1));
  for (size_t i = 0; i < keys_.size(); ++i) {
    const auto v = t.params.contains(keys_[i]) ? SearchSpace::format(t.params.at(keys_[i])) : "-";  // "-": inactive
    r += pad(v + " ", std::max<size_t>(10, labels_[i].size() + 1));  // a space even after a long value
  }
  return r;
}

std::string TrialTable::table(const std::vector<Trial>& trials) const {
  std::string out = header();
  for (const auto& t : trials) out += "\n" + row(t);
  return out;
}

std::string TrialTable::describe(const Params& params) const {
  std::string out;
  for (size_t i = 0; i < keys_.size(); ++i) {
    if (!params.contains(keys_[i])) continue;  // an inactive conditional parameter
    if (!out.empty()) out += " ";
    out += labels_[i] + "=" + SearchSpace::format(params.at(keys_[i]));
  }
  return out;
}

StudyMetrics::StudyMetrics(const std::string& dir, double sign, const std::vector<Trial>& trials)
    : path_((fs::path(dir) / "metrics.jsonl").string()), sign_(sign) {
  std::vector<const Trial*> done;
  for (const auto& t : trials)
    if (t.state != TrialState::kRunning) done.push_back(&t);
  std::stable_sort(done.begin(), done.end(), [](const Trial* a, const Trial* b) { return a->finished < b->finished; });
  std::error_code ec;
  fs::remove(path_, ec);
  sink_ = std::make_unique<monitor::JsonlSink>(path_);
  for (const auto* t : done) add(*t);
}

StudyMetrics::~StudyMetrics() = default;

void StudyMetrics::add(const Trial& t) {
  ++step_;
  const bool has = t.value && std::isfinite(*t.value);
  if (has && t.state == TrialState::kComplete && (!best_ || sign_ * *t.value < sign_ * *best_)) best_ = *t.value;
  std::map<std::string, double> m = {{"tune/trial", static_cast<double>(t.id)}};
  if (has) m["tune/value"] = *t.value;
  if (best_) m["tune/best"] = *best_;
  sink_->write(step_, m);
}

int64_t best_trial_index(const std::vector<Trial>& trials, double sign) {
  int64_t best = -1;
  for (size_t i = 0; i < trials.size(); ++i) {
    const auto& t = trials[i];
    if (t.state != TrialState::kComplete || !t.value || !std::isfinite(*t.value)) continue;
    if (best < 0 || sign * *t.value < sign * *trials[static_cast<size_t>(best)].value) best = static_cast<int64_t>(i);
  }
  return best;
}

std::vector<std::string> write_study_outputs(const std::string& dir, const SearchSpace& space,
                                             const std::vector<Trial>& trials, double sign, const TuneOptions& o) {
  std::vector<std::string> written;
  auto path = [&](const char* name) { return (fs::path(dir) / name).string(); };
  const auto best = best_so_far(trials, sign);
  std::string convergence;
  for (size_t i = 0; i < trials.size(); ++i) {
    const auto& t = trials[i];
    nlohmann::json j = {{"trial", t.id}, {"state", state_name(t.state)}};
    j["value"] = t.value && std::isfinite(*t.value) ? nlohmann::json(*t.value) : nlohmann::json(nullptr);
    j["best"] = std::isfinite(best[i]) ? nlohmann::json(best[i]) : nlohmann::json(nullptr);
    convergence += j.dump() + "\n";
  }
  write_file_atomic(path("convergence.jsonl"), convergence);
  written.push_back(path("convergence.jsonl"));
  const int64_t b = best_trial_index(trials, sign);
  if (b >= 0) {
    const auto& t = trials[static_cast<size_t>(b)];
    auto overrides = o.fixed_overrides;
    for (const auto& s : space.overrides(t.params)) overrides.push_back(s);
    nlohmann::json best_params = {
        {"trial", t.id}, {"value", *t.value}, {"metric", o.metric}, {"params", t.params}, {"overrides", overrides}};
    write_file_atomic(path("best_params.json"), best_params.dump(2) + "\n");
    written.push_back(path("best_params.json"));
    if (!o.base_config_text.empty()) {
      config::LoadOptions lo;
      lo.overrides = overrides;
      lo.quiet = true;
      const auto loaded = config::load_text(o.base_config_text, lo, "the study's base config");
      write_file_atomic(path("best_config.json"), config::to_json(loaded.config) + "\n");
      written.push_back(path("best_config.json"));
    }
  }
  if (!o.objective2.empty()) {
    for (const auto& p : write_pareto_outputs(dir, space, trials, sign, o.metric, o.objective2)) written.push_back(p);
  }
  if (o.plot) {
    std::vector<double> xs, ys;  // a staircase: each improvement is a vertical step at its trial
    for (size_t i = 0; i < trials.size(); ++i) {
      const double x = static_cast<double>(trials[i].id);
      if (i > 0 && std::isfinite(best[i - 1]) && best[i] != best[i - 1]) {
        xs.push_back(x);
        ys.push_back(best[i - 1]);
      }
      xs.push_back(x);
      ys.push_back(best[i]);
    }
    try {
      o.plot(path("convergence.png"), xs, ys, o.metric);
      written.push_back(path("convergence.png"));
    } catch (const std::exception& e) {
      log::warn("tune: could not write ", path("convergence.png"), ": ", e.what());
    }
  }
  return written;
}

}  // namespace xtrain::tune
