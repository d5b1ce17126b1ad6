// The study loop: one thread, polling. Each turn reaps finished children, reads new metric lines,
// asks the pruner, and launches trials up to --parallel. A trial's record is written before its
// process starts and after every change, so the disk always says what is running.
#include "xtrain/tune/tuner.h"

#include <c10/util/StringUtil.h>

#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <limits>
#include <thread>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/config/config.h"
#include "xtrain/monitor/progress.h"
#include "xtrain/tune/pareto.h"
#include "xtrain/tune/report.h"
#include "xtrain/tune/sampler.h"
#include "xtrain/tune/study_store.h"

namespace xtrain::tune {
namespace fs = std::filesystem;
namespace {

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// The base config must accept the space's keys: a typo would otherwise run the whole study on an
// ignored key. Checked once, at the centre of the space.
void validate_against_config(const SearchSpace& space, const TuneOptions& o) {
  if (o.base_config_text.empty()) return;
  auto overrides = o.fixed_overrides;
  for (const auto& s : space.overrides(space.every_key())) overrides.push_back(s);  // conditional keys too
  config::LoadOptions lo;
  lo.overrides = overrides;
  lo.quiet = true;
  config::Loaded loaded;
  try {
    loaded = config::load_text(o.base_config_text, lo, "the base config");
  } catch (const UsageError& e) {
    XTRAIN_USAGE_ERROR("tune: the base config rejects the trial overrides (", c10::Join(" ", overrides),
                       "): ", e.what());
  }
  const std::string marker = "ignoring unknown key '";
  for (const auto& w : loaded.warnings) {
    const auto at = w.find(marker);
    if (at == std::string::npos) continue;
    const auto path = w.substr(at + marker.size(), w.find('\'', at + marker.size()) - at - marker.size());
    for (const auto& p : space.params()) {
      XTRAIN_USAGE_CHECK(p.key != path && p.key.rfind(path + ".", 0) != 0, "tune: the search space's key '", p.key,
                         "' is not a config key (", w, ")");
    }
  }
}

// The step a trial trains to (xtrain.steps of its resolved config; the space may tune it). The
// pruners never stop a trial at that step: its value there is final, so it counts as complete.
int64_t final_step(const TuneOptions& o, const std::vector<std::string>& overrides) {
  if (o.base_config_text.empty()) return std::numeric_limits<int64_t>::max();
  config::LoadOptions lo;
  lo.overrides = overrides;
  lo.quiet = true;
  try {
    return config::load_text(o.base_config_text, lo, "the base config").config.trainer.steps;
  } catch (const std::exception&) {
    return std::numeric_limits<int64_t>::max();  // the trial will report the problem itself
  }
}

struct Running {
  size_t index;
  ChildProcess process;
  MetricsTail tail;
  int64_t final_step;
};

class StudyRunner {
 public:
  StudyRunner(const SearchSpace& space, const TuneOptions& o);
  TuneResult run();

 private:
  void resume();
  void launch_ready();
  void start(size_t index);
  void poll();
  void finish_exited(Running& r);
  void finished(Trial& t);
  TrialLaunch launch_of(const Trial& t) const;
  void measure_objective2(Trial& t);
  std::vector<Observation> observations(std::vector<std::vector<double>>* pending) const;

  const SearchSpace& space_;
  const TuneOptions& o_;
  double sign_;
  std::vector<std::string> keys_;
  std::unique_ptr<Sampler> sampler_;  // before store_: bad names fail before anything is written
  std::unique_ptr<Pruner> pruner_;
  StudyStore store_;
  TrialTable table_;
  std::unique_ptr<StudyMetrics> metrics_;
  std::vector<Trial> trials_;
  std::vector<Running> running_;
  std::deque<size_t> rerun_;
  int64_t consecutive_failures_ = 0;
  std::string stop_reason_;
};

StudySettings settings_of(const SearchSpace& space, const TuneOptions& o) {
  StudySettings s;
  s.space = space.to_json();
  s.metric = o.metric;
  s.mode = o.mode;
  s.sampler = o.sampler;
  s.seed = o.seed;
  s.fixed_overrides = o.fixed_overrides;
  return s;
}

// Checks the options before the store creates anything on disk.
const std::string& checked_study_dir(const TuneOptions& o) {
  XTRAIN_USAGE_CHECK(!o.study_dir.empty(), "tune: no study directory (--study)");
  XTRAIN_USAGE_CHECK(o.trials > 0, "tune: --trials must be > 0, got ", o.trials);
  XTRAIN_USAGE_CHECK(o.parallel > 0, "tune: --parallel must be > 0, got ", o.parallel);
  XTRAIN_USAGE_CHECK(o.max_failures > 0, "tune: --max-failures must be > 0, got ", o.max_failures);
  TORCH_INTERNAL_ASSERT(o.command, "tune: no trial command builder");
  TORCH_INTERNAL_ASSERT(o.objective2.empty() || o.measure_objective2, "tune: objective2 without a measurement");
  XTRAIN_USAGE_CHECK(o.trial_seconds >= 0, "tune: --trial-seconds must be >= 0, got ", o.trial_seconds);
  return o.study_dir;
}

double sign_of(const std::string& mode) {
  XTRAIN_USAGE_CHECK(mode == "min" || mode == "max", "tune: --mode must be min or max, got '", mode, "'");
  return mode == "min" ? 1.0 : -1.0;
}

StudyRunner::StudyRunner(const SearchSpace& space, const TuneOptions& o)
    : space_(space),
      o_(o),
      sign_(sign_of(o.mode)),
      keys_(metric_keys(o.metric)),
      sampler_(make_sampler(o.sampler, space, o.gp_initial)),
      pruner_(make_pruner(o.pruner, o.pruning, sign_of(o.mode))),
      store_(checked_study_dir(o), settings_of(space, o), o.base_config_text),
      table_(space, o.metric, o.objective2) {}

void StudyRunner::resume() {
  trials_ = store_.load_trials();
  int64_t counts[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < trials_.size(); ++i) {
    auto& t = trials_[i];
    ++counts[static_cast<int>(t.state)];
    if (t.state != TrialState::kRunning) continue;
    if (t.attempt >= 3) {  // it was running each time the study died: do not try forever
      t.state = TrialState::kFailed;
      t.error = c10::str("interrupted ", t.attempt, " times (the study stopped while it ran); not re-run");
      t.finished = unix_now();
      store_.save(t);
    } else {
      rerun_.push_back(i);
    }
  }
  if (!trials_.empty() && o_.print) {
    log::info("tune: resuming ", store_.dir(), ": ", counts[1], " complete, ", counts[2], " pruned, ", counts[3],
              " failed, ", counts[0], " interrupted (re-run with the same parameters)");
  }
}

std::vector<Observation> StudyRunner::observations(std::vector<std::vector<double>>* pending) const {
  std::vector<Observation> done;
  for (const auto& t : trials_) {
    const auto x = space_.encode(t.params);
    if (t.state == TrialState::kRunning) {
      pending->push_back(x);
    } else {
      // Pruned trials count with their last value (worse than they would have finished: fine,
      // they were stopped for being bad); failed ones as NaN, i.e. the worst value seen.
      const bool has = t.state != TrialState::kFailed && t.value && std::isfinite(*t.value);
      done.push_back({x, has ? sign_ * *t.value : NAN});
    }
  }
  return done;
}

void StudyRunner::launch_ready() {
  while (static_cast<int64_t>(running_.size()) < o_.parallel && stop_reason_.empty()) {
    if (!rerun_.empty()) {
      const size_t i = rerun_.front();
      rerun_.pop_front();
      start(i);
      continue;
    }
    if (static_cast<int64_t>(trials_.size()) >= o_.trials) return;
    Trial t;
    t.id = trials_.empty() ? 0 : trials_.back().id + 1;
    std::vector<std::vector<double>> pending;
    const auto done = observations(&pending);
    Rng rng(o_.seed, static_cast<uint64_t>(t.id));  // proposals depend on (seed, trial number) only
    t.params = space_.decode(sampler_->propose(done, pending, rng));
    trials_.push_back(std::move(t));
    start(trials_.size() - 1);
  }
}

void StudyRunner::start(size_t index) {
  Trial& t = trials_[index];
  t.state = TrialState::kRunning;
  t.attempt += 1;
  t.started = unix_now();
  t.finished = 0.0;
  t.intermediate.clear();
  t.rungs.clear();
  t.value.reset();
  t.error.clear();
  const std::string dir = store_.trial_run_dir(t.id);
  std::error_code ec;
  fs::remove_all(dir, ec);  // a re-run starts clean (no half-written checkpoints)
  fs::create_directories(dir, ec);
  XTRAIN_USAGE_CHECK(!ec, "tune: cannot create ", dir, ": ", ec.message());
  store_.save(t);
  const TrialLaunch launch = launch_of(t);
  if (o_.print) {
    log::info("tune: trial ", trial_name(t.id), " started (", t.id + 1, "/", o_.trials, t.attempt > 1 ? ", re-run" : "",
              "): ", table_.describe(t.params));
  }
  try {
    auto command = o_.command(launch);
    if (o_.trial_seconds > 0) command.env.emplace_back("XTRAIN_TRAIN_SECONDS", c10::str(o_.trial_seconds));
    auto child = ChildProcess::start(command, dir + "/stdout.log", dir + "/stderr.log");
    running_.push_back(
        {index, std::move(child), MetricsTail(dir + "/metrics.jsonl", keys_), final_step(o_, launch.overrides)});
  } catch (const std::exception& e) {
    t.state = TrialState::kFailed;
    t.error = e.what();
    finished(t);
  }
}

TrialLaunch StudyRunner::launch_of(const Trial& t) const {
  TrialLaunch launch{t.id, o_.fixed_overrides, store_.trial_run_dir(t.id), store_.base_config_path()};
  for (const auto& s : space_.overrides(t.params)) launch.overrides.push_back(s);
  return launch;
}

void StudyRunner::measure_objective2(Trial& t) {
  if (!o_.measure_objective2 || t.state != TrialState::kComplete || t.objective2) return;
  try {
    t.objective2 = o_.measure_objective2(launch_of(t));
  } catch (const std::exception& e) {
    log::warn("tune: trial ", trial_name(t.id), ": no ", o_.objective2, ": ", e.what());
  }
}

void StudyRunner::finished(Trial& t) {
  t.finished = unix_now();  // before the measurement: a trial's time is its training run
  measure_objective2(t);
  store_.save(t);
  metrics_->add(t);
  consecutive_failures_ = t.state == TrialState::kFailed ? consecutive_failures_ + 1 : 0;
  if (o_.print) log::info(table_.row(t));
  if (o_.print && t.state == TrialState::kComplete &&
      best_trial_index(trials_, sign_) == static_cast<int64_t>(&t - trials_.data())) {
    log::info("tune: new best ", o_.metric, " ", *t.value, " (trial ", trial_name(t.id), ")");
  }
  if (t.state == TrialState::kFailed && o_.print) log::warn("tune: trial ", trial_name(t.id), " failed: ", t.error);
  if (consecutive_failures_ >= o_.max_failures && stop_reason_.empty()) {
    stop_reason_ = c10::str("tune: ", consecutive_failures_, " trials in a row failed (--max-failures ",
                            o_.max_failures, "); the last, trial ", trial_name(t.id), ": ", t.error,
                            "\nFix the cause and run the same command again to resume (failed trials are not re-run).");
  }
}

void StudyRunner::finish_exited(Running& r) {
  Trial& t = trials_[r.index];
  if (r.process.exit_code() != 0) {
    const auto tail = file_tail(store_.trial_run_dir(t.id) + "/stderr.log", 1500);
    t.state = TrialState::kFailed;
    t.error = r.process.describe_exit() + (tail.empty() ? " (nothing on stderr)" : ":\n" + tail);
  } else if (t.intermediate.empty()) {
    t.state = TrialState::kFailed;
    t.error = c10::str("finished without reporting ", o_.metric, " (looked for ", c10::Join(" or ", keys_), " in ",
                       store_.trial_run_dir(t.id), "/metrics.jsonl)");
  } else if (!std::isfinite(t.intermediate.back().second)) {
    t.state = TrialState::kFailed;
    t.error = c10::str(o_.metric, " is ", t.intermediate.back().second, " at step ", t.intermediate.back().first);
  } else {
    t.state = TrialState::kComplete;
    t.value = t.intermediate.back().second;
  }
  finished(t);
}

void StudyRunner::poll() {
  for (size_t k = 0; k < running_.size();) {
    Running& r = running_[k];
    Trial& t = trials_[r.index];
    const bool exited = r.process.poll();  // before reading: an exited trial's lines are all there
    const auto fresh = r.tail.read_new();
    std::optional<std::string> prune;
    for (const auto& v : fresh) {
      t.intermediate.push_back(v);
      if (!pruner_ || prune) continue;
      auto reason = pruner_->check(t, trials_);  // also records ASHA rungs, at the final step too
      if (v.first < r.final_step) prune = std::move(reason);
    }
    if (exited) {
      finish_exited(r);
    } else if (prune) {
      r.process.terminate(o_.kill_grace_seconds);
      t.state = TrialState::kPruned;
      for (const auto& [s, v] : t.intermediate)
        if (std::isfinite(v)) t.value = v;
      t.error = *prune;
      finished(t);
    } else {
      if (!fresh.empty()) store_.save(t);
      ++k;
      continue;
    }
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(k));
  }
}

TuneResult StudyRunner::run() {
  validate_against_config(space_, o_);
  resume();
  metrics_ = std::make_unique<StudyMetrics>(store_.dir(), sign_, trials_);
  if (o_.print)
    log::info("tune: ", o_.trials, " trials, ", o_.parallel, " at a time, sampler ", o_.sampler, ", pruner ", o_.pruner,
              ", ", o_.mode, "imising ", o_.metric, "\n", table_.header());
  launch_ready();
  while (!running_.empty()) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o_.poll_seconds));
    poll();
    launch_ready();
  }
  for (auto& t : trials_) {  // complete trials of a resumed study that were not measured yet
    if (o_.measure_objective2 && t.state == TrialState::kComplete && !t.objective2) {
      measure_objective2(t);
      store_.save(t);
    }
  }
  TuneResult result;
  result.trials = trials_;
  const int64_t best = best_trial_index(trials_, sign_);
  result.best_id = best >= 0 ? trials_[static_cast<size_t>(best)].id : -1;
  result.stop_reason = stop_reason_;
  const auto written = write_study_outputs(store_.dir(), space_, trials_, sign_, o_);
  if (o_.print) {
    log::info("tune: trials\n", table_.table(trials_));
    if (best >= 0) {
      const auto& b = trials_[static_cast<size_t>(best)];
      log::info("tune: best ", o_.metric, " ", *b.value, " (trial ", trial_name(b.id),
                "): ", c10::Join(" ", space_.overrides(b.params)));
    }
    if (!o_.objective2.empty()) {
      log::info("tune: Pareto front (", o_.metric, " and ", o_.objective2, ", non-dominated complete trials)\n",
                pareto_table(trials_, pareto_trials(trials_, sign_), space_, o_.metric, o_.objective2));
    }
    log::info("tune: wrote ", c10::Join(", ", written));
  }
  return result;
}

}  // namespace

std::vector<std::string> metric_keys(const std::string& metric) {
  std::vector<std::string> keys = {metric};
  const auto underscore = metric.find('_');
  if (metric.find('/') == std::string::npos && underscore != std::string::npos) {
    keys.push_back(metric.substr(0, underscore) + "/" + metric.substr(underscore + 1));
  }
  return keys;
}

TuneResult run_study(const SearchSpace& space, const TuneOptions& options) {
  StudyRunner runner(space, options);
  return runner.run();
}

}  // namespace xtrain::tune
