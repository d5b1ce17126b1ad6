// The command-line program: parses argv with CLI11, runs a subcommand, maps errors to exit codes
// (0 done, 2 usage or config error, 1 failure while running). Only this area catches and exits.
#pragma once

namespace xtrain::cli {

int run(int argc, char** argv);

}  // namespace xtrain::cli
