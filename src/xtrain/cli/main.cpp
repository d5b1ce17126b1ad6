// xtrain: the one program. Subcommands live in cli/*.cpp; this only dispatches.
#include "xtrain/cli/commands.h"

int main(int argc, char** argv) { return xtrain::cli::run(argc, argv); }
