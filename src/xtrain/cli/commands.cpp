#include "xtrain/cli/commands.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "xtrain/base/error.h"
#include "xtrain/config/config.h"

namespace xtrain::cli {

int run(int argc, char** argv) {
  CLI::App app{"xtrain: train deep-learning models from a laptop CPU to a GPU cluster"};
  app.require_subcommand(1);
  auto* cfg = app.add_subcommand("config", "Print the resolved config or the config reference");
  std::string path;
  bool docs = false;
  cfg->add_option("--config", path, "ds_config.json");
  cfg->add_flag("--docs", docs, "print docs/config.md");
  try {
    app.parse(argc, argv);
    if (docs) {
      std::cout << config::markdown_reference();
    } else {
      std::cout << config::to_json(config::load(path, {}).config) << "\n";
    }
    return 0;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const UsageError& e) {
    std::cerr << "xtrain: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace xtrain::cli
