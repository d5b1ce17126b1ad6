// `xtrain train` and `xtrain generate`: thin wrappers over engine/trainer.h (`eval`: eval_command.cpp).
#include <CLI/CLI.hpp>

#include <iostream>

#include "xtrain/base/log.h"
#include "xtrain/base/utf8.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/run/run_tokenizer.h"
#include "xtrain/run/train.h"
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

Command add_generate(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Sample text from a trained GPT (with the run's tokenizer)");
  struct Args {
    std::string run_dir, prompt = "\n", tag;
    int64_t tokens = 200, top_k = 40;
    double temperature = 0.8;
    uint64_t seed = 1;
    bool raw = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--run,-r", a->run_dir, "run directory")->required();
  cmd->add_option("--prompt,-p", a->prompt, "text to continue");
  cmd->add_option("--tokens,-n", a->tokens, "tokens to generate (bytes for a byte-level run)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--temperature,-t", a->temperature, "sampling temperature")->check(CLI::PositiveNumber);
  cmd->add_option("--top-k,-k", a->top_k, "sample among the k most likely (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", a->seed, "random seed");
  cmd->add_option("--tag", a->tag, "checkpoint tag (default: latest)");
  cmd->add_flag("--raw", a->raw, "write the decoded bytes as they are (default: bytes that are not UTF-8, and "
                                 "control characters, shown as \\xNN)");
  return {cmd, [a] {
            auto run = load_trained_run(a->run_dir, a->tag);
            // The run's own tokenizer (<run>/tokenizer/, saved by train) encodes the prompt and decodes.
            const auto tokenizer = load_run_tokenizer(a->run_dir, run.config, run.model.options.vocab);
            const std::string text = a->prompt + generate_text(run.model, *tokenizer, a->prompt, a->tokens,
                                                               a->temperature, a->top_k, a->seed);
            std::cout << (a->raw ? text : printable_text(text)) << std::endl;
            return 0;
          }};
}

}  // namespace xtrain::cli
