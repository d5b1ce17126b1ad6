// `xtrain ckpt …` and `xtrain config`: checkpoint utilities and the config reference.
#include <CLI/CLI.hpp>

#include <iostream>

#include "xtrain/checkpoint/store.h"
#include "xtrain/cli/subcommands.h"
#include "xtrain/config/config.h"

namespace xtrain::cli {

Command add_ckpt(CLI::App& app) {
  auto* cmd = app.add_subcommand("ckpt", "Checkpoint utilities");
  cmd->require_subcommand(1);
  auto* fp = cmd->add_subcommand("fingerprint", "One hex digest over every model and optimizer tensor");
  auto path = std::make_shared<std::string>();
  fp->add_option("path", *path, "a run directory, a checkpoints folder, or one checkpoint tag folder")->required();
  return {cmd, [path] {
            std::cout << checkpoint::fingerprint(*path) << std::endl;
            return 0;
          }};
}

Command add_config(CLI::App& app) {
  auto* cmd = app.add_subcommand("config", "Print the resolved config (every key), or the config reference");
  auto path = std::make_shared<std::string>();
  auto overrides = std::make_shared<std::vector<std::string>>();
  auto docs = std::make_shared<bool>(false);
  cmd->add_option("--config,-c", *path, "ds_config.json")->check(CLI::ExistingFile);
  cmd->add_option("--set,-s", *overrides, "override a key by dotted path");
  cmd->add_flag("--docs", *docs, "print the reference (docs/config.md)");
  return {cmd, [path, overrides, docs] {
            if (*docs) {
              std::cout << config::markdown_reference();
              return 0;
            }
            config::LoadOptions o;
            o.overrides = *overrides;
            auto loaded = config::load(*path, o);
            for (const auto& w : loaded.warnings) std::cerr << "warning: " << w << "\n";
            for (const auto& n : loaded.notes) std::cerr << "config: " << n << "\n";
            std::cout << config::to_json(loaded.config) << std::endl;
            return 0;
          }};
}

std::vector<Command> all_commands(CLI::App& app) {
  return {add_train(app), add_eval(app), add_generate(app), add_ckpt(app), add_config(app),
          add_launch(app), add_tune(app), add_dashboard(app)};
}

}  // namespace xtrain::cli
