// `xtrain compress --run DIR --config compress.json [--calibration-batches N] [--output DIR]`:
// distils, prunes and/or quantises a trained run (compress/pipeline.h), prints the before/after
// table and writes <run>/compressed/: model.pt (every tensor by name, pruned shapes), config.json
// (the run's config, with the student's model keys when distilled), quant.json (quantised), and
// summary.md. `xtrain export --run DIR` picks that folder up. Thin: the work is in compress/.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "xtrain/base/error.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/compress/artifact.h"
#include "xtrain/compress/pipeline.h"
#include "xtrain/config/config.h"
#include "xtrain/data/sampler.h"
#include "xtrain/run/run_dir.h"
#include "xtrain/run/smoke.h"
#include "xtrain/run/train.h"
#include "xtrain/nn/losses.h"

namespace xtrain::cli {
namespace {
namespace fs = std::filesystem;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  TORCH_CHECK(out.good(), "compress: could not write ", path);
}

struct CompressArgs {
  std::string run_dir, config_path, output, tag;
  int64_t calibration_batches = -1;
};

// Draws micro-batches from a dataset in a fixed shuffled order (its own sampler per use).
struct BatchSource {
  std::shared_ptr<data::Dataset> dataset;
  std::shared_ptr<data::Sampler> sampler;  // the dataset's own (O(1) memory for token shards)
  int64_t micro = 1;
  BatchSource(std::shared_ptr<data::Dataset> d, uint64_t seed, int64_t m)
      : dataset(std::move(d)), sampler(dataset->make_sampler(seed, 0, 1)), micro(m) {}
  data::Batch next() const { return dataset->collate(sampler->next(micro)); }
};

// XTRAIN_SMOKE (engine/smoke.h): each loop of the pipeline at its smallest (a gradual pruning
// schedule still ramps: over 4 fine-tuning steps, masks every step).
void shrink_for_smoke(compress::CompressOptions& o) {
  if (!smoke::enabled()) return;
  auto& p = o.pruning;
  p.finetune.steps = std::min<int64_t>(p.finetune.steps, 4);
  if (p.gradual) {
    p.start_step = 0;
    p.end_step = std::max<int64_t>(1, std::min(p.end_step, p.finetune.steps));
    p.frequency = 1;
  }
  o.quantization.qat.steps = std::min<int64_t>(o.quantization.qat.steps, 2);
  o.quantization.calibration_batches = std::min<int64_t>(o.quantization.calibration_batches, 2);
  o.distillation.train.steps = std::min<int64_t>(o.distillation.train.steps, 2);
  o.evaluation.batches = smoke::cap(o.evaluation.batches, 2);  // 0: all
  o.evaluation.latency_repeats = std::min<int64_t>(o.evaluation.latency_repeats, 2);
}

int run_compress(const CompressArgs& a) {
  std::vector<std::string> warnings;
  auto o = compress::parse_compress_options(read_file(a.config_path), a.config_path, &warnings);
  shrink_for_smoke(o);
  for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
  if (a.calibration_batches >= 0) o.quantization.calibration_batches = a.calibration_batches;
  auto run = load_trained_run(o.distillation.enabled && !o.distillation.teacher_run.empty() ? o.distillation.teacher_run
                                                                                             : a.run_dir,
                              a.tag);
  const auto& cfg = run.config;
  auto splits = data::open_datasets(cfg.data, cfg.model.seq_len, data::default_cache_dir());
  const int64_t micro = *cfg.engine.train_micro_batch_size_per_gpu;
  BatchSource train(splits.train, cfg.trainer.seed + 1, micro), calib(splits.train, cfg.trainer.seed + 2, micro);
  const int64_t latency_batch = o.evaluation.latency_batch > 0 ? o.evaluation.latency_batch : micro;

  compress::CompressHooks h;
  h.train_batch = [train](int64_t) { return train.next(); };
  h.calibration_input = [calib](int64_t) { return calib.next().input; };
  h.loss = nn::make_loss(cfg.loss);
  h.evaluate = [&](const models::Model& m) {
    const auto r = evaluate(m, *splits.val, cfg, o.evaluation.batches);
    return std::make_pair(r.loss, r.accuracy);
  };
  h.latency_input = BatchSource(splits.val, 7, latency_batch).next().input;
  h.default_lr = cfg.optimizer.lr();
  const auto info = splits.train->info();
  if (info.kind == "image") h.hints.sample_shape = info.sample_shape;
  h.hints.dropout = cfg.model.dropout;
  h.log = [](const std::string& line) { std::cerr << "compress: " << line << "\n"; };
  config::Config out_cfg = cfg;
  if (o.distillation.enabled) {
    std::vector<std::string> overrides;
    for (const auto& kv : o.distillation.student) overrides.push_back("xtrain.model." + kv);
    config::LoadOptions lo;
    lo.overrides = overrides;
    lo.quiet = true;
    out_cfg = config::load((fs::path(a.run_dir) / "config.json").string(), lo).config;
    h.build_student = [out_cfg] {
      torch::manual_seed(out_cfg.trainer.seed);
      return models::build_model(out_cfg.model);
    };
  }

  const auto r = compress::compress_model(run.model, o, h);
  std::cout << r.summary;
  const std::string dir = !a.output.empty() ? a.output : !o.output.empty() ? o.output : (fs::path(a.run_dir) / "compressed").string();
  fs::create_directories(dir);
  compress::save_state(*r.model.module, (fs::path(dir) / "model.pt").string());
  write_text((fs::path(dir) / "config.json").string(), config::to_json(out_cfg) + "\n");
  if (r.plan) write_text((fs::path(dir) / "quant.json").string(), compress::quant_plan_json(*r.graph, *r.plan));
  write_text((fs::path(dir) / "summary.md").string(), r.summary);
  std::cout << "compressed model: " << dir << std::endl;
  return 0;
}

}  // namespace

Command add_compress(CLI::App& app) {
  auto* cmd = app.add_subcommand("compress", "Quantise (PTQ/QAT), prune and/or distil a trained run (compress.json)");
  auto a = std::make_shared<CompressArgs>();
  cmd->add_option("--run,-r", a->run_dir, "run directory (its latest checkpoint)")->required();
  cmd->add_option("--config,-c", a->config_path, "compress.json")->required()->check(CLI::ExistingFile);
  cmd->add_option("--calibration-batches", a->calibration_batches, "calibration micro-batches (overrides the config)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--output,-o", a->output, "output folder (default: <run>/compressed)");
  cmd->add_option("--tag", a->tag, "checkpoint tag (default: latest)");
  return {cmd, [a] { return run_compress(*a); }};
}

}  // namespace xtrain::cli
