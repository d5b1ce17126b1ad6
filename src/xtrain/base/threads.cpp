// Thread policy (threads.h). OpenMP's and OpenBLAS's runtime entry points are looked up with dlsym
// in the libraries LibTorch already loaded, so xtrain links neither directly and runs (with a
// smaller report) when a LibTorch build has no OpenBLAS.
#include "xtrain/base/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "xtrain/base/env.h"
#include "xtrain/base/error.h"

namespace xtrain::threads {

namespace {

constexpr const char* kMarker = "XTRAIN_LOADER_ENV";
constexpr const char* kMarkerSet = "XTRAIN_LOADER_ENV_SET";  // the names the re-exec set
// 2^4 cycles: OpenBLAS workers go to sleep almost at once instead of spinning against ATen's.
constexpr const char* kOpenBlasTimeout = "4";
// glibc 2.35+: malloc's own large chunks get transparent huge pages (helps when the pool is off).
constexpr const char* kHugeTlbTunable = "glibc.malloc.hugetlb=1";

int affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

template <class Fn>
Fn lookup(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

std::string current(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

ThreadPolicy decide(int64_t requested) {
  XTRAIN_USAGE_CHECK(requested >= 0, "threads: xtrain.threads must be >= 0 (0: decide), got ", requested);
  ThreadPolicy p;
  p.cores = affinity_cores();
  p.local_ranks = static_cast<int>(std::max<int64_t>(1, env::get_int_or("LOCAL_WORLD_SIZE", 1)));
  if (requested > 0) {
    p.threads = static_cast<int>(requested);
    p.source = "xtrain.threads";
  } else if (auto omp = env::get_int("OMP_NUM_THREADS"); omp && *omp > 0) {
    p.threads = static_cast<int>(*omp);
    p.source = "OMP_NUM_THREADS";
  } else {
    p.threads = std::max(1, p.cores / p.local_ranks);
    p.source = "cores / local ranks";
  }
  return p;
}

Applied apply(const ThreadPolicy& policy) {
  TORCH_INTERNAL_ASSERT(policy.threads > 0, "threads: a policy needs at least one thread");
  at::set_num_threads(policy.threads);  // also omp_set_num_threads in an OpenMP build
  Applied a;
  if (auto set_blas = lookup<void (*)(int)>("openblas_set_num_threads")) set_blas(policy.threads);
  if (auto get_blas = lookup<int (*)()>("openblas_get_num_threads")) a.openblas = get_blas();
  a.aten = at::get_num_threads();
  auto get_omp = lookup<int (*)()>("omp_get_max_threads");
  a.openmp = get_omp ? get_omp() : a.aten;
  const std::string wait = current("OMP_WAIT_POLICY");
  a.passive = wait == "PASSIVE" || wait == "passive";
  return a;
}

std::string Applied::describe() const {
  return c10::str("threads: ", aten, " (ATen ", aten, ", OpenMP ", openmp, ", OpenBLAS ",
                  openblas < 0 ? std::string("absent") : std::to_string(openblas), "; waiting workers ",
                  passive ? "passive" : "spin (OMP_WAIT_POLICY is not PASSIVE)", ")");
}

std::vector<std::pair<std::string, std::string>> loader_environment(int threads) {
  std::vector<std::pair<std::string, std::string>> out;
  auto keep_or = [&](const char* name, const std::string& fallback) {
    const std::string v = current(name);
    out.emplace_back(name, v.empty() ? fallback : v);
  };
  keep_or("OMP_WAIT_POLICY", "PASSIVE");
  keep_or("OPENBLAS_THREAD_TIMEOUT", kOpenBlasTimeout);
  keep_or("OMP_NUM_THREADS", std::to_string(std::max(1, threads)));
  std::string tunables = current("GLIBC_TUNABLES");
  if (tunables.find("glibc.malloc.hugetlb") == std::string::npos) {
    tunables += (tunables.empty() ? "" : ":") + std::string(kHugeTlbTunable);
  }
  out.emplace_back("GLIBC_TUNABLES", tunables);
  return out;
}

std::vector<std::string> variables_set_by_reexec() {
  std::vector<std::string> out;
  std::string list = current(kMarkerSet);
  for (size_t start = 0; start < list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

void ensure_loader_environment(int argc, char** argv) {
  if (current(kMarker) == "1" || current("XTRAIN_NO_REEXEC") == "1" || argc < 1) return;
  std::string changed;
  for (const auto& [name, value] : loader_environment(decide().threads)) {
    if (current(name) == value) continue;
    setenv(name.c_str(), value.c_str(), 1);
    changed += (changed.empty() ? "" : ",") + name;
  }
  if (changed.empty()) return;
  setenv(kMarker, "1", 1);
  setenv(kMarkerSet, changed.c_str(), 1);  // so `xtrain launch` can tell them from the user's
  execv("/proc/self/exe", argv);
  // Still here: exec failed. Run on with the libraries as they loaded (slower, not wrong).
  std::fprintf(stderr, "xtrain: could not re-execute with the thread environment (%s); continuing\n",
               std::strerror(errno));
}

}  // namespace xtrain::threads
