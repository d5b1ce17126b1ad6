// Registration of every subcommand: each file cli/<name>.cpp adds its options to the app and
// returns the function that runs it. Keeps commands.cpp a dispatcher only.
#pragma once
#include <functional>
#include <vector>

namespace CLI {
class App;
}

namespace xtrain::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

std::vector<Command> all_commands(CLI::App& app);

Command add_train(CLI::App& app);
Command add_eval(CLI::App& app);
Command add_generate(CLI::App& app);
Command add_ckpt(CLI::App& app);
Command add_config(CLI::App& app);
Command add_launch(CLI::App& app);
Command add_dashboard(CLI::App& app);
Command add_tune(CLI::App& app);  // cli/tune_command.cpp
Command add_compress(CLI::App& app);
Command add_export(CLI::App& app);
Command add_data(CLI::App& app);  // cli/data_command.cpp
Command add_serve(CLI::App& app);  // cli/serve_command.cpp
Command add_plan(CLI::App& app);  // cli/plan_command.cpp
Command add_federated(CLI::App& app);  // cli/federated_command.cpp

}  // namespace xtrain::cli
