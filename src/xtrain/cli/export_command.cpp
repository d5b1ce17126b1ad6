// `xtrain export --run DIR --safetensors OUT [--layout xtrain|hf-gpt2]`: the weights (export_safetensors.h).
// `xtrain export --run DIR --onnx OUT.onnx [--int8] [--from DIR] [--calibration-batches N]`: the
// run's model (or its compressed version, <run>/compressed/ when present: pruned shapes, the
// distilled student, the int8 plan) as an ONNX file (opset 17, IR 8; export/onnx/onnx_export.h).
// --int8 writes QDQ: with the compressed folder's quant.json when there is one, else after a
// static calibration on N training batches. Both forms save the run's tokenizer into tokenizer/ beside the
// output (export_run_tokenizer). Thin: the work is in compress/ and export/.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "xtrain/base/error.h"
#include "xtrain/cli/export_safetensors.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/compress/artifact.h"
#include "xtrain/compress/quant/quantize.h"
#include "xtrain/config/config.h"
#include "xtrain/data/sampler.h"
#include "xtrain/models/registry.h"
#include "xtrain/run/run_dir.h"
#include "xtrain/run/train.h"
#include "xtrain/export/onnx/onnx_export.h"

namespace xtrain::cli {
namespace {
namespace fs = std::filesystem;

struct ExportArgs {
  std::string run_dir, onnx, from, tag, safetensors, layout = "xtrain";
  bool int8 = false;
  int64_t calibration_batches = 16;
};

int run_export(const ExportArgs& a) {
  std::string from = a.from;
  if (from.empty() && fs::exists(fs::path(a.run_dir) / "compressed" / "model.pt")) {
    from = (fs::path(a.run_dir) / "compressed").string();
  }
  config::Config cfg;
  models::Model model;
  if (!from.empty()) {
    config::LoadOptions lo;
    lo.quiet = true;
    cfg = config::load((fs::path(from) / "config.json").string(), lo).config;
    torch::manual_seed(cfg.trainer.seed);
    model = models::build_model(cfg.model);
    compress::load_state(*model.module, (fs::path(from) / "model.pt").string());
    model.module->eval();
    std::cerr << "export: the compressed model in " << from << "\n";
  } else {
    auto run = load_trained_run(a.run_dir, a.tag);
    cfg = run.config;
    model = run.model;
  }
  compress::TraceHints hints;
  hints.sample_shape = models::input_sample_shape(cfg.model);  // from its registry entry
  hints.dropout = cfg.model.dropout;
  std::shared_ptr<compress::QuantPlan> plan;
  std::shared_ptr<compress::Graph> graph;
  if (a.int8) {
    const auto quant_json = from.empty() ? fs::path() : fs::path(from) / "quant.json";
    if (!quant_json.empty() && fs::exists(quant_json)) {
      const auto text = read_file(quant_json.string());
      graph = std::make_shared<compress::Graph>(compress::trace(*model.module, hints));
      plan = std::make_shared<compress::QuantPlan>(*graph, compress::quant_options_from_json(text));
      compress::restore_quant_plan(*graph, *plan, text);
    } else {
      std::cerr << "export: no quant.json; calibrating static int8 on " << a.calibration_batches << " batches\n";
      auto splits = data::open_datasets(cfg.data, cfg.model.seq_len, data::default_cache_dir());
      const int64_t micro = *cfg.engine.train_micro_batch_size_per_gpu;
      std::shared_ptr<data::Sampler> sampler = splits.train->make_sampler(cfg.trainer.seed + 2, 0, 1);
      auto q = compress::wrap(model, {}, hints);
      compress::calibrate(q, [&](int64_t) { return splits.train->collate(sampler->next(micro)).input; },
                          a.calibration_batches);
      compress::convert(q);
      graph = q.graph, plan = q.plan;
    }
  } else {
    graph = std::make_shared<compress::Graph>(compress::trace(*model.module, hints));
  }
  export_run_tokenizer(a.run_dir, cfg, a.onnx);  // first: a refused tokenizer folder leaves no half export
  onnx_export::ExportOptions o;
  o.int8 = a.int8;
  const auto r = onnx_export::export_onnx(*graph, plan.get(), a.onnx, o);
  std::cout << "wrote " << r.path << ": " << r.nodes << " nodes, " << r.file_bytes << " bytes, opset " << o.opset
            << ", IR " << o.ir_version << (a.int8 ? c10::str(", ", r.quantized_layers, " int8 (QDQ) layers") : "")
            << "\ninput " << r.input_name << " [" << c10::Join(", ", r.input_dims) << "], output " << r.output_name
            << std::endl;
  return 0;
}

}  // namespace

Command add_export(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "export", "Export a run's model to ONNX (fp32, or QDQ int8 with --int8) or its weights to safetensors");
  auto a = std::make_shared<ExportArgs>();
  cmd->add_option("--run,-r", a->run_dir, "run directory")->required();
  auto* onnx = cmd->add_option("--onnx", a->onnx, "output .onnx file");
  auto* st = cmd->add_option("--safetensors", a->safetensors, "output .safetensors file (the weights)");
  cmd->add_option("--layout", a->layout, "--safetensors names: xtrain (what init_from reads) or hf-gpt2 (Hugging Face)")
      ->check(CLI::IsMember({"xtrain", "hf-gpt2"}))
      ->needs(st);
  auto* int8 = cmd->add_flag("--int8", a->int8, "QDQ int8 (the compressed plan, or a static calibration)");
  auto* from = cmd->add_option("--from", a->from, "a compressed folder (default: <run>/compressed when it exists)");
  auto* calibration =
      cmd->add_option("--calibration-batches", a->calibration_batches, "--int8 without a plan: calibration batches")
          ->check(CLI::PositiveNumber);
  for (auto* onnx_only : {onnx, int8, from, calibration}) st->excludes(onnx_only);
  cmd->add_option("--tag", a->tag, "checkpoint tag (default: latest)");
  return {cmd, [a] {
            XTRAIN_USAGE_CHECK(!a->onnx.empty() || !a->safetensors.empty(),
                               "export: give --onnx OUT or --safetensors OUT");
            if (!a->safetensors.empty()) return export_safetensors(a->run_dir, a->tag, a->safetensors, a->layout);
            return run_export(*a);
          }};
}

}  // namespace xtrain::cli
