#include "xtrain/cli/commands.h"

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <iostream>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/cli/subcommands.h"

namespace xtrain::cli {

int run(int argc, char** argv) {
  CLI::App app{"xtrain: a training engine for deep-learning models (DeepSpeed-format configs)"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every command");
  std::vector<Command> commands = all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    for (auto& c : commands) {
      if (c.app->parsed()) return c.run();
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
