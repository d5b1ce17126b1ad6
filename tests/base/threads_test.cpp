// The thread policy: how the count is decided (config, OMP_NUM_THREADS, cores / local ranks), that
// apply() makes ATen, OpenMP and OpenBLAS agree, which loader variables are wanted (user values kept,
// OpenBLAS's kernel selection never touched), and the one re-exec, observed in a child process
// (this test binary re-run on a disabled child test).
#include "xtrain/base/threads.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/paths.h"
#include "xtrain/base/error.h"

namespace xtrain::threads::threads_test {
namespace {

// Sets (or unsets, with nullopt) variables for the scope; restores them after.
class EnvScope {
 public:
  using Vars = std::initializer_list<std::pair<const std::string, std::optional<std::string>>>;
  explicit EnvScope(Vars vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
      v ? setenv(k.c_str(), v->c_str(), 1) : unsetenv(k.c_str());
    }
  }
  ~EnvScope() {
    for (const auto& [k, v] : saved_) v ? setenv(k.c_str(), v->c_str(), 1) : unsetenv(k.c_str());
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

std::string value_of(const std::vector<std::pair<std::string, std::string>>& env, const std::string& name) {
  for (const auto& [k, v] : env) {
    if (k == name) return v;
  }
  return "<absent>";
}

TEST(Threads, DecideTakesConfigThenOmpNumThreadsThenCoresPerLocalRank) {
  EnvScope env({{"OMP_NUM_THREADS", std::nullopt}, {"LOCAL_WORLD_SIZE", std::nullopt}});
  const auto all = decide();
  EXPECT_GE(all.cores, 1);
  EXPECT_EQ(all.threads, all.cores);
  EXPECT_EQ(all.source, "cores / local ranks");
  EXPECT_EQ(decide(3).threads, 3);
  EXPECT_EQ(decide(3).source, "xtrain.threads");
  {
    EnvScope ranks({{"LOCAL_WORLD_SIZE", "2"}});
    EXPECT_EQ(decide().threads, std::max(1, all.cores / 2));
    EXPECT_EQ(decide().local_ranks, 2);
    EnvScope more({{"LOCAL_WORLD_SIZE", std::to_string(4 * all.cores)}});
    EXPECT_EQ(decide().threads, 1);  // more ranks than cores: never 0
  }
  EnvScope omp({{"OMP_NUM_THREADS", "1"}});
  EXPECT_EQ(decide().threads, 1);
  EXPECT_EQ(decide().source, "OMP_NUM_THREADS");
  EXPECT_EQ(decide(2).threads, 2);  // the config still wins
  EXPECT_THROW(decide(-1), UsageError);
}

TEST(Threads, ApplyMakesAtenOpenMpAndOpenBlasAgree) {
  const int saved = at::get_num_threads();
  for (int n : {2, 1}) {
    ThreadPolicy p;
    p.threads = n;
    const auto a = apply(p);
    EXPECT_EQ(a.aten, n);
    EXPECT_EQ(a.openmp, n);
    if (a.openblas >= 0) {
      EXPECT_EQ(a.openblas, n);  // Debian's LibTorch links OpenBLAS: present here
    }
    const auto line = a.describe();
    EXPECT_NE(line.find("threads: " + std::to_string(n) + " (ATen " + std::to_string(n) + ", OpenMP "),
              std::string::npos)
        << line;
    EXPECT_NE(line.find("waiting workers"), std::string::npos) << line;
  }
  ThreadPolicy restore;
  restore.threads = saved;
  apply(restore);
}

TEST(Threads, LoaderEnvironmentKeepsUserValuesAndNeverSelectsTheBlasKernel) {
  EnvScope env({{"OMP_WAIT_POLICY", std::nullopt},
                {"OPENBLAS_THREAD_TIMEOUT", std::nullopt},
                {"OMP_NUM_THREADS", std::nullopt},
                {"GLIBC_TUNABLES", std::nullopt}});
  auto want = loader_environment(2);
  EXPECT_EQ(value_of(want, "OMP_WAIT_POLICY"), "PASSIVE");
  EXPECT_EQ(value_of(want, "OPENBLAS_THREAD_TIMEOUT"), "4");
  EXPECT_EQ(value_of(want, "OMP_NUM_THREADS"), "2");
  EXPECT_EQ(value_of(want, "GLIBC_TUNABLES"), "glibc.malloc.hugetlb=1");
  for (const auto& [k, v] : want) {
    EXPECT_TRUE(k.rfind("OPENBLAS_", 0) != 0 || k == "OPENBLAS_THREAD_TIMEOUT") << k;  // no CORETYPE & co.
  }
  EnvScope user({{"OMP_WAIT_POLICY", "ACTIVE"}, {"GLIBC_TUNABLES", "glibc.malloc.arena_max=2"}});
  want = loader_environment(2);
  EXPECT_EQ(value_of(want, "OMP_WAIT_POLICY"), "ACTIVE");
  EXPECT_EQ(value_of(want, "GLIBC_TUNABLES"), "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
}

// The child side of ReexecsOnceWithTheLoaderVariables: counts its runs through the environment,
// asks for the loader environment (which re-executes this binary once), then reports.
TEST(DISABLED_ThreadsReexecChild, Run) {
  const int runs = std::atoi(std::getenv("XTRAIN_TEST_RUNS") ? std::getenv("XTRAIN_TEST_RUNS") : "0") + 1;
  setenv("XTRAIN_TEST_RUNS", std::to_string(runs).c_str(), 1);
  std::ifstream cmdline("/proc/self/cmdline");
  std::string all((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t start = 0, end; start < all.size(); start = end + 1) {
    end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ensure_loader_environment(static_cast<int>(args.size()), argv.data());
  auto get = [](const char* k) { return std::string(std::getenv(k) ? std::getenv(k) : "<unset>"); };
  std::printf("REPORT runs=%d wait=%s timeout=%s tunables=%s marker=%s coretype=%s\n", runs,
              get("OMP_WAIT_POLICY").c_str(), get("OPENBLAS_THREAD_TIMEOUT").c_str(), get("GLIBC_TUNABLES").c_str(),
              get("XTRAIN_LOADER_ENV").c_str(), get("OPENBLAS_CORETYPE").c_str());
}

TEST(Threads, ReexecsOnceWithTheLoaderVariables) {
  char self[4096] = {0};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof self - 1), 0);
  const std::string run = std::string(self) +
                          " --gtest_also_run_disabled_tests --gtest_filter=DISABLED_ThreadsReexecChild.Run 2>&1";
  const std::string clean =
      "env -u XTRAIN_LOADER_ENV -u XTRAIN_NO_REEXEC -u XTRAIN_TEST_RUNS -u OMP_WAIT_POLICY -u "
      "OPENBLAS_THREAD_TIMEOUT -u GLIBC_TUNABLES -u OPENBLAS_CORETYPE ";
  std::string out;
  ASSERT_EQ(xtrain::testing::run_command(clean + run, &out), 0) << out;
  EXPECT_NE(out.find("REPORT runs=2 wait=PASSIVE timeout=4 tunables=glibc.malloc.hugetlb=1 marker=1 "
                     "coretype=<unset>"),
            std::string::npos)
      << out;
  // Everything already in place (a launcher's child): no re-exec.
  ASSERT_EQ(xtrain::testing::run_command(clean + "OMP_WAIT_POLICY=PASSIVE OPENBLAS_THREAD_TIMEOUT=4 OMP_NUM_THREADS=1 "
                                                 "GLIBC_TUNABLES=glibc.malloc.hugetlb=1 " + run,
                                         &out),
            0)
      << out;
  EXPECT_NE(out.find("REPORT runs=1 wait=PASSIVE"), std::string::npos) << out;
  // Opted out: no re-exec, nothing set.
  ASSERT_EQ(xtrain::testing::run_command(clean + "XTRAIN_NO_REEXEC=1 " + run, &out), 0) << out;
  EXPECT_NE(out.find("REPORT runs=1 wait=<unset>"), std::string::npos) << out;
}

}  // namespace
}  // namespace xtrain::threads::threads_test
