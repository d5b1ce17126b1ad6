// The thread policy: xtrain decides how many threads a rank computes with (all the cores it may
// run on, divided among the ranks of its node) and makes ATen, OpenMP (which oneDNN follows) and
// OpenBLAS agree. Design choice: what the libraries read only when they load (the OpenMP wait
// policy, OpenBLAS's spin timeout, glibc's malloc tunables) is put in the environment before they
// load: by the launcher for its children, and by `xtrain` itself, which re-executes itself once
// when the variables are missing (reference/platform.md, "thread fights").
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace xtrain::threads {

struct ThreadPolicy {
  int threads = 1;      // intra-op threads of this rank
  int cores = 1;        // CPUs this process may run on (sched_getaffinity)
  int local_ranks = 1;  // ranks sharing them (LOCAL_WORLD_SIZE)
  std::string source;   // why: "xtrain.threads", "OMP_NUM_THREADS" or "cores / local ranks"
};

// requested > 0 (xtrain.threads) wins; then an OMP_NUM_THREADS the user set; else
// max(1, cores / LOCAL_WORLD_SIZE).
ThreadPolicy decide(int64_t requested = 0);

struct Applied {
  int aten = 0;
  int openmp = 0;
  int openblas = -1;     // -1: OpenBLAS's runtime API is not in the process
  bool passive = false;  // OMP_WAIT_POLICY=PASSIVE was in the environment when OpenMP loaded
  std::string describe() const;  // "threads: 2 (ATen 2, OpenMP 2, OpenBLAS 2; waiting workers passive)"
};

// Sets ATen's (and so OpenMP's) and OpenBLAS's thread counts; returns what each now reports.
Applied apply(const ThreadPolicy& policy);

// The variables the libraries must find before they load, for a process that computes with
// `threads` threads: OMP_WAIT_POLICY, OPENBLAS_THREAD_TIMEOUT, OMP_NUM_THREADS, GLIBC_TUNABLES.
// A value the user already set is kept (GLIBC_TUNABLES gets our tunable appended). Never touches
// OpenBLAS's kernel selection (OPENBLAS_CORETYPE and friends).
std::vector<std::pair<std::string, std::string>> loader_environment(int threads);

// For main(): when loader_environment(decide().threads) differs from the environment, sets it
// and execv's /proc/self/exe with the same arguments, once (marker: XTRAIN_LOADER_ENV=1); returns
// when nothing needs doing, when the marker is set, when XTRAIN_NO_REEXEC=1, or when exec fails.
void ensure_loader_environment(int argc, char** argv);
// The variables ensure_loader_environment set in this process (not the user's): the launcher
// decides those afresh for its ranks (its own thread count is not theirs).
std::vector<std::string> variables_set_by_reexec();

}  // namespace xtrain::threads
