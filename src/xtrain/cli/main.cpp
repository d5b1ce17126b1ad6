// xtrain: the one program. Subcommands live in cli/*.cpp; this only prepares the process and
// dispatches. Before anything computes: the variables OpenMP, OpenBLAS and glibc read when they load
// (re-executing once if they are missing, base/threads.h), the memory pool as LibTorch's CPU
// allocator, and the default thread policy (the trainer re-applies both with the config's values).
// Under srun or mpirun, LOCAL_WORLD_SIZE is set from their variables first, so that both divide the
// node among its ranks as they do under xtrain launch. SIGPIPE is ignored: a peer that vanishes
// mid-collective (its node lost) then surfaces as EPIPE, an error this rank reports and its launcher
// handles, instead of a silent death by signal.
#include <csignal>
#include <cstdlib>
#include <string>

#include "xtrain/base/memory_pool.h"
#include "xtrain/base/threads.h"
#include "xtrain/cli/commands.h"
#include "xtrain/comm/rank_info.h"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  if (auto local = xtrain::comm::local_world_size_to_export(xtrain::comm::current_environment())) {
    setenv("LOCAL_WORLD_SIZE", std::to_string(*local).c_str(), 1);
  }
  xtrain::threads::ensure_loader_environment(argc, argv);
  xtrain::memory_pool::install(xtrain::base::MemoryPoolOptions{});
  xtrain::threads::apply(xtrain::threads::decide());
  return xtrain::cli::run(argc, argv);
}
