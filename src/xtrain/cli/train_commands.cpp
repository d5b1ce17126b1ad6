// `xtrain train`, `xtrain eval`, `xtrain generate`: thin wrappers over engine/trainer.h.
#include <CLI/CLI.hpp>

#include <iostream>

#include "xtrain/base/log.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/engine/trainer.h"
#include "xtrain/monitor/progress.h"

namespace xtrain::cli {

Command add_train(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a model (the default: a byte-level GPT on Moby Dick)");
  auto req = std::make_shared<TrainRequest>();
  cmd->add_option("--config,-c", req->config_path, "ds_config.json (DeepSpeed format; default: configs/default.json)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set,-s", req->overrides, "override a key by dotted path, e.g. --set optimizer.params.lr=3e-4")
      ->allow_extra_args(false);
  cmd->add_option("--output,-o", req->output, "run directory (default: <xtrain.output>/<model>-<date>-<time>)");
  cmd->add_flag("--resume", req->resume, "continue the run directory's latest checkpoint (default: the newest run)");
  cmd->add_flag("--find-lr", req->find_lr, "run a short learning-rate range test and suggest a learning rate");
  return {cmd, [req] {
            if (req->find_lr) {
              find_lr(*req);
            } else {
              train(*req);
            }
            return 0;
          }};
}

Command add_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Validation loss / accuracy of a run's latest checkpoint");
  auto run_dir = std::make_shared<std::string>();
  auto batches = std::make_shared<int64_t>(0);
  auto tag = std::make_shared<std::string>();
  cmd->add_option("--run,-r", *run_dir, "run directory")->required();
  cmd->add_option("--batches", *batches, "validation micro-batches (default: all)");
  cmd->add_option("--tag", *tag, "checkpoint tag (default: latest)");
  return {cmd, [run_dir, batches, tag] {
            auto run = load_trained_run(*run_dir, *tag);
            auto splits = data::open_datasets(run.config.data, run.config.model.seq_len, data::default_cache_dir());
            const auto r = evaluate(run.model, *splits.val, run.config, *batches);
            std::cout << "checkpoint: " << run.checkpoint_dir << "\n";
            std::cout << "val loss: " << r.loss << "\n";
            if (run.model.task == "lm") std::cout << "val perplexity: " << std::exp(r.loss) << "\n";
            if (r.accuracy >= 0) std::cout << "val accuracy: " << 100.0 * r.accuracy << "%\n";
            std::cout << "samples: " << r.samples << "\n";
            return 0;
          }};
}

Command add_generate(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Sample text from a trained GPT");
  struct Args {
    std::string run_dir, prompt = "\n", tag;
    int64_t tokens = 200, top_k = 40;
    double temperature = 0.8;
    uint64_t seed = 1;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--run,-r", a->run_dir, "run directory")->required();
  cmd->add_option("--prompt,-p", a->prompt, "text to continue");
  cmd->add_option("--tokens,-n", a->tokens, "bytes to generate")->check(CLI::PositiveNumber);
  cmd->add_option("--temperature,-t", a->temperature, "sampling temperature")->check(CLI::PositiveNumber);
  cmd->add_option("--top-k,-k", a->top_k, "sample among the k most likely (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", a->seed, "random seed");
  cmd->add_option("--tag", a->tag, "checkpoint tag (default: latest)");
  return {cmd, [a] {
            auto run = load_trained_run(a->run_dir, a->tag);
            std::cout << a->prompt << generate_text(run.model, a->prompt, a->tokens, a->temperature, a->top_k, a->seed)
                      << std::endl;
            return 0;
          }};
}

}  // namespace xtrain::cli
