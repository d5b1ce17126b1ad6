#include "xtrain/cli/commands.h"

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <iostream>
#include <memory>
#include <set>
#include <string>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/base/plugin.h"
#include "xtrain/cli/subcommands.h"

namespace xtrain::cli {
namespace {

using Plugins = std::shared_ptr<std::vector<std::string>>;

// --plugin on the commands that build models or datasets from a config: the libraries are opened
// (base/plugin.h) after parsing and before the command loads its config, so a name a plugin
// registers (xtrain.model.type, xtrain.data.dataset, ...) is known to the config checks too.
std::vector<Plugins> add_plugin_options(const std::vector<Command>& commands) {
  static const std::set<std::string> kTakesPlugins{"train", "eval", "generate", "tune", "compress", "export", "config",
                                                  "serve"};
  std::vector<Plugins> plugins(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    if (!kTakesPlugins.count(commands[i].app->get_name())) continue;
    plugins[i] = std::make_shared<std::vector<std::string>>();
    commands[i]
        .app->add_option("--plugin", *plugins[i],
                         "load this shared library first: models, datasets ... it registers become usable by name "
                         "(repeatable; examples/plugin/)")
        ->allow_extra_args(false);
  }
  return plugins;
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"xtrain: a training engine for deep-learning models (DeepSpeed-format configs)"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every command");
  std::vector<Command> commands = all_commands(app);
  const std::vector<Plugins> plugins = add_plugin_options(commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    for (size_t i = 0; i < commands.size(); ++i) {
      if (!commands[i].app->parsed()) continue;
      if (plugins[i]) plugin::load_all(*plugins[i]);
      return commands[i].run();
    }
    return 2;
  } catch (const UsageError& e) {
    log::error(e.what());
    return 2;
  } catch (const c10::Error& e) {
    log::error(e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    log::error(e.what());
    return 1;
  }
}

}  // namespace xtrain::cli
