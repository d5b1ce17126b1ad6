// `xtrain train` and `xtrain train --find-lr` from top to bottom: the config (checked before any
// work), the process group, the run directory, the build (setup.h), then the loop (train_loop.h).
#include "xtrain/run/train.h"

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/base/log.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/run/run_checkpoint.h"
#include "xtrain/run/run_checks.h"
#include "xtrain/run/run_dir.h"
#include "xtrain/run/run_tokenizer.h"
#include "xtrain/run/train_loop.h"
#include "xtrain/sched/lr_finder.h"

namespace xtrain {
namespace fs = std::filesystem;

namespace {

// The run's config, with its warnings and notes logged and every check `xtrain config` makes.
config::Loaded load_checked(const TrainRequest& request, const std::string& run_dir, bool log_notes) {
  auto loaded = load_run_config(request, run_dir);
  for (const auto& w : loaded.warnings) log::warn(w);
  if (log_notes) {
    for (const auto& n : loaded.notes) log::info("config: ", n);
  }
  check_run_config(loaded.config);  // what `xtrain config` checks, before any work
  return loaded;
}

void set_threads(const config::Config& cfg) {
  if (cfg.trainer.threads > 0) at::set_num_threads(static_cast<int>(cfg.trainer.threads));
}

// --resume without --output: the latest run under xtrain.output.
std::string run_to_resume(const TrainRequest& request) {
  const auto probe = load_run_config(request, "");
  const std::string run_dir = latest_run_dir(probe.config.trainer.output);
  XTRAIN_USAGE_CHECK(!run_dir.empty(), "--resume: no run with checkpoints under ", probe.config.trainer.output,
                     "/; pass --output RUN_DIR");
  return run_dir;
}

// Joins the data-parallel group when started as one of several ranks (launcher, srun, mpirun).
std::shared_ptr<comm::Communicator> join_group(const comm::RankInfo& rank, const config::Config& cfg) {
  if (rank.world_size <= 1) return comm::Communicator::single();
  log::info("distributed: ", rank.describe());
  return comm::Communicator::create(rank, cfg.comm);
}

// Rank 0 names a new run (its clock) and the others follow; a run with checkpoints needs --resume.
std::string open_run_dir(std::string run_dir, const TrainRequest& request, const config::Config& cfg,
                         const comm::RankInfo& rank, comm::Communicator& group) {
  if (run_dir.empty()) {
    if (rank.rank == 0) run_dir = new_run_dir_name(cfg.trainer.output, cfg.trainer.name, cfg.model.type);
    if (group.distributed()) run_dir = comm::broadcast_string(group, run_dir);
  }
  XTRAIN_USAGE_CHECK(request.resume || checkpoint::latest_tag((fs::path(run_dir) / "checkpoints").string()).empty(),
                     "run directory ", run_dir,
                     " already has checkpoints: add --resume to continue it, or choose another --output");
  if (rank.rank == 0) fs::create_directories(run_dir);
  return run_dir;
}

}  // namespace

TrainResult train(const TrainRequest& request) {
  const comm::RankInfo rank = comm::rank_info_from_env();
  log::Settings ls = log::settings();
  ls.rank = rank.rank;
  log::configure(ls);
  std::string run_dir = request.resume && request.output.empty() ? run_to_resume(request) : request.output;
  const auto loaded = load_checked(request, run_dir, /*log_notes=*/true);
  auto group = join_group(rank, loaded.config);
  run_dir = open_run_dir(run_dir, request, loaded.config, rank, *group);
  set_threads(loaded.config);
  Setup s = build(loaded.config, rank, group, run_dir);
  if (s.lead()) write_file_atomic((fs::path(run_dir) / "config.json").string(), config::to_json(s.config) + "\n");
  if (s.lead()) save_run_tokenizer(s.config.data, run_dir);  // what generate encodes and decodes with
  // A classifier's class names in index order (text_classify: the training file's labels).
  const auto classes = s.data.train->info().class_names;
  if (s.lead() && !classes.empty()) {
    write_file_atomic((fs::path(run_dir) / "labels.json").string(), nlohmann::json(classes).dump() + "\n");
  }
  for (const auto& [name, text] : s.data.train->info().run_files) {
    if (s.lead()) write_file_atomic((fs::path(run_dir) / name).string(), text);
  }
  s.comm->barrier();  // the run directory exists for every rank
  if (request.resume) resume(s, run_dir);
  log_start(s, run_dir);
  return TrainLoop(s, run_dir, request.resume).run();
}

double find_lr(const TrainRequest& request) {
  const auto loaded = load_checked(request, "", /*log_notes=*/false);
  set_threads(loaded.config);
  Setup s = build(loaded.config);
  const int64_t steps = std::min<int64_t>(200, s.config.trainer.steps);
  const double lo = 1e-6, hi = 1.0;
  std::vector<double> lrs, losses;
  monitor::Progress progress("steps", steps, 20, true);
  s.engine->train(true);
  double best = INFINITY;
  for (int64_t i = 0; i < steps; ++i) {
    const double lr = lo * std::pow(hi / lo, static_cast<double>(i) / static_cast<double>(steps - 1));
    s.engine->set_lr_override(lr);
    do {
      const auto batch = s.train_loader->next();
      s.engine->backward(s.engine->forward(batch));
    } while (!s.engine->step());
    const double loss = s.engine->last_step().loss;
    progress.update(i + 1, 1, {{"lr", fmt(lr, 3)}, {"loss", fmt(loss)}});
    if (!std::isfinite(loss) || loss > 4 * best) break;  // diverged: the rest of the sweep says nothing
    best = std::min(best, loss);
    lrs.push_back(lr);
    losses.push_back(loss);
  }
  progress.finish();
  const double suggestion = sched::suggest_lr(lrs, losses);
  log::info("lr range test: ", lrs.size(), " steps from ", fmt(lo, 2), " to ", fmt(lrs.empty() ? lo : lrs.back(), 2));
  log::info("loss vs log(lr): ", monitor::sparkline(losses, 60));
  for (size_t i = 0; i < lrs.size(); i += std::max<size_t>(1, lrs.size() / 12)) {
    log::info("  lr ", fmt(lrs[i], 3), "  loss ", fmt(losses[i]));
  }
  log::info("suggested lr: ", fmt(suggestion, 3), "  (use --set optimizer.params.lr=", fmt(suggestion, 3), ")");
  return suggestion;
}

}  // namespace xtrain
