// `xtrain tune --config base.json --space space.json --trials N --parallel P --metric val_loss
// --mode min [--sampler gp|random] [--pruner median|asha|none] [--study DIR]`: hyperparameter
// search (tune/tuner.h). Each trial is `xtrain train --config STUDY/base_config.json --set k=v ...
// --output STUDY/trials/<id> [--plugin LIB ...]` run as a child process (this same binary,
// /proc/self/exe), or the command given by --trial-command / $XTRAIN_TUNE_TRIAL_COMMAND (tests use a
// fake trainer). Architecture search: --trial-seconds S (a training-time budget per trial) and
// --objective2 params|latency (measured here, in this process, on the model each complete trial
// trained: its run directory's config.json), with the Pareto front at the end.
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "xtrain/base/env.h"
#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/base/log.h"
#include "xtrain/base/plugin.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/config/config.h"
#include "xtrain/run/smoke.h"
#include "xtrain/run/train.h"
#include "xtrain/models/factory.h"
#include "xtrain/models/registry.h"
#include "xtrain/monitor/plot/plot.h"
#include "xtrain/tune/space.h"
#include "xtrain/tune/tuner.h"

namespace xtrain::cli {
namespace {
namespace fs = std::filesystem;

struct TuneArgs {
  std::string config_path, space_path, trial_command, objective2;
  int64_t latency_batch = 8;
  tune::TuneOptions options;
};

// "/bin/sh fake.sh" -> {"/bin/sh", "fake.sh"}: whitespace-separated words, no shell quoting.
std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The trial command prefix: --trial-command, else $XTRAIN_TUNE_TRIAL_COMMAND, else `<this xtrain> train`.
std::vector<std::string> trial_prefix(const std::string& flag) {
  std::string text = flag.empty() ? env::get_or("XTRAIN_TUNE_TRIAL_COMMAND", "") : flag;
  if (!text.empty()) {
    auto words = split_words(text);
    XTRAIN_USAGE_CHECK(!words.empty(), "tune: the trial command is empty");
    return words;
  }
  std::error_code ec;
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  XTRAIN_USAGE_CHECK(!ec, "tune: cannot find this program (/proc/self/exe): ", ec.message(),
                     "; pass --trial-command '/path/to/xtrain train'");
  return {self.string(), "train"};
}

tune::CommandBuilder command_builder(std::vector<std::string> prefix, int64_t parallel) {
  // P trials share the machine: each gets its share of the cores unless the user chose.
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max<int64_t>(1, cores / parallel));
  const bool user_threads = env::get("OMP_NUM_THREADS").has_value();
  return [prefix, threads, user_threads](const tune::TrialLaunch& l) {
    tune::Command c;
    c.argv = prefix;
    // The plugins this tune loaded (--plugin, absolute paths): the trials build the same models.
    for (const auto& p : plugin::loaded()) c.argv.insert(c.argv.end(), {"--plugin", p});
    if (!l.base_config_path.empty()) c.argv.insert(c.argv.end(), {"--config", l.base_config_path});
    for (const auto& s : l.overrides) c.argv.insert(c.argv.end(), {"--set", s});
    c.argv.insert(c.argv.end(), {"--output", l.run_dir});
    c.env.emplace_back("XTRAIN_TUNE_TRIAL", std::to_string(l.id));
    if (!user_threads) c.env.emplace_back("OMP_NUM_THREADS", threads);
    return c;
  };
}

void write_convergence_png(const std::string& path, const std::vector<double>& trials, const std::vector<double>& best,
                           const std::string& metric) {
  monitor::PlotOptions po;
  po.title = "xtrain tune: best " + metric + " so far";
  po.x_label = "trial";
  po.y_label = metric;
  monitor::write_line_plot_png(path, {monitor::Series{"best so far", trials, best}}, po);
}

// The model a trial trained, from its run directory's config.json (the resolved config: vocab from
// the tokenizer, XTRAIN_SMOKE's sizes), else from the base config with the trial's overrides.
models::Model trial_model(const tune::TrialLaunch& l, const std::string& base_text) {
  config::LoadOptions lo;
  lo.quiet = true;
  const auto saved = (fs::path(l.run_dir) / "config.json").string();
  config::Loaded loaded;
  if (fs::exists(saved)) {
    loaded = config::load(saved, lo);
  } else {
    lo.overrides = l.overrides;
    loaded = config::load_text(base_text, lo, "the base config");
  }
  return models::build_model(loaded.config.model);
}

// Median forward time in ms of `batch` samples (zeros tokens [B, T] for a language model, N(0, 1)
// samples of the model's input shape otherwise), no grad, eval mode, after two warm-up calls.
double forward_latency_ms(const models::Model& m, int64_t batch, int threads) {
  at::set_num_threads(threads);
  at::NoGradGuard no_grad;
  m.module->eval();
  std::vector<int64_t> shape = {batch};
  at::Tensor input;
  if (m.task == "lm") {
    input = at::zeros({batch, m.options.seq_len}, at::kLong);
  } else {
    for (auto d : models::input_sample_shape(m.options)) shape.push_back(d);
    input = at::randn(shape);
  }
  for (int i = 0; i < 2; ++i) m.forward(input);
  std::vector<double> ms;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    m.forward(input);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// --objective2: "params" -> the parameter count; "latency" -> forward ms at --latency-batch.
void set_objective2(TuneArgs& a) {
  auto& o = a.options;
  if (a.objective2.empty()) return;
  o.objective2 = a.objective2 == "latency" ? "latency_ms" : "params";
  const std::string base = o.base_config_text;
  const int64_t batch = a.latency_batch;
  const int threads = static_cast<int>(std::max<int64_t>(1, std::thread::hardware_concurrency() / o.parallel));
  const bool latency = a.objective2 == "latency";
  o.measure_objective2 = [base, batch, threads, latency](const tune::TrialLaunch& l) {
    const auto m = trial_model(l, base);
    if (!latency) return static_cast<double>(models::count_parameters(*m.module));
    return forward_latency_ms(m, batch, threads);
  };
}

std::string default_study_dir(const std::string& base_config_text) {
  config::LoadOptions lo;
  lo.quiet = true;
  const auto loaded = config::load_text(base_config_text, lo, "the base config");
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return (fs::path(loaded.config.trainer.output) / (std::string("tune-") + stamp)).string();
}

int run_tune(TuneArgs& a) {
  auto& o = a.options;
  const auto space = tune::SearchSpace::load(a.space_path);
  o.trials = smoke::cap(o.trials, 2);  // XTRAIN_SMOKE (engine/smoke.h): each trial's train shrinks itself
  o.base_config_text = a.config_path.empty() ? default_config_text() : read_file(a.config_path);
  if (a.config_path.empty()) {  // the default's machine adjustments, as `xtrain train` applies them
    std::string note;
    const auto adjust = default_config_overrides(o.fixed_overrides, &note);
    o.fixed_overrides.insert(o.fixed_overrides.begin(), adjust.begin(), adjust.end());
    if (!note.empty()) log::info("tune: ", note);
  }
  if (o.study_dir.empty()) o.study_dir = default_study_dir(o.base_config_text);
  const auto prefix = trial_prefix(a.trial_command);
  tune::check_executable(prefix.front());
  o.command = command_builder(prefix, o.parallel);
  o.plot = write_convergence_png;
  set_objective2(a);
  log::info("tune: study ", o.study_dir, " (run the same command with --study ", o.study_dir, " to resume)");
  const auto result = tune::run_study(space, o);
  if (result.best_id >= 0) {
    std::cout << "best " << o.metric << ": trial " << tune::trial_name(result.best_id) << "  config: " << o.study_dir
              << "/best_config.json" << std::endl;
  }
  if (!result.stop_reason.empty()) {
    log::error(result.stop_reason);
    return 1;
  }
  return 0;
}

}  // namespace

Command add_tune(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("tune", "Hyperparameter search: Bayesian optimisation (GP-EI) or random, with early stopping");
  auto a = std::make_shared<TuneArgs>();
  auto& o = a->options;
  cmd->add_option("--config,-c", a->config_path, "base ds_config.json (default: the built-in default)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--space", a->space_path,
                  "search space JSON: {\"optimizer.params.lr\": {\"type\": \"loguniform\", ...}}")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--trials,-n", o.trials, "trials in the study")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--parallel,-p", o.parallel, "trials run at once")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--metric", o.metric, "metric to optimise (val_loss reads val/loss from metrics.jsonl)")
      ->capture_default_str();
  cmd->add_option("--mode", o.mode, "min or max")->capture_default_str()->check(CLI::IsMember({"min", "max"}));
  cmd->add_option("--sampler", o.sampler, "gp (Bayesian optimisation) or random")
      ->capture_default_str()
      ->check(CLI::IsMember({"gp", "random"}));
  cmd->add_option("--gp-initial", o.gp_initial, "gp: random trials before the GP proposes (0: max(5, dims + 1))")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--pruner", o.pruner, "early stopping: median, asha or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"median", "asha", "none"}));
  cmd->add_option("--study", o.study_dir,
                  "study folder; an existing one is resumed (default: <xtrain.output>/tune-<time>)");
  cmd->add_option("--seed", o.seed, "sampler seed: the same seed gives the same proposals")->capture_default_str();
  cmd->add_option("--set,-s", o.fixed_overrides, "override a key for every trial, e.g. --set xtrain.steps=150");
  cmd->add_option("--max-failures", o.max_failures, "consecutive failed trials that stop the study")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--trial-command", a->trial_command,
                  "run trials with this command instead of 'xtrain train' (it gets --config, --set, --output)");
  cmd->add_option("--trial-seconds", o.trial_seconds,
                  "train each trial for this many seconds of training time, then evaluate (0: xtrain.steps)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--objective2", a->objective2,
                  "second objective for a Pareto front: params (parameter count) or latency (forward ms)")
      ->check(CLI::IsMember({"params", "latency"}));
  cmd->add_option("--latency-batch", a->latency_batch, "--objective2 latency: samples per timed forward")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--asha-min-step", o.pruning.min_resource, "ASHA's first rung (0: the first reported step)")
      ->capture_default_str();
  cmd->add_option("--asha-reduction", o.pruning.reduction_factor, "ASHA keeps the top 1/eta at each rung")
      ->capture_default_str()
      ->check(CLI::Range(2, 100));
  cmd->add_option("--median-startup", o.pruning.startup_trials, "completed trials before the median rule stops any")
      ->capture_default_str();
  cmd->add_option("--median-warmup", o.pruning.warmup_steps, "the median rule never stops a trial before this step")
      ->capture_default_str();
  return {cmd, [a] { return run_tune(*a); }};
}

}  // namespace xtrain::cli
