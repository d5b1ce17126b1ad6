// The CPU memory pool: size classes, reuse of a freed block, alignment and huge-page advice, the cap,
// the statistics, release, thread safety under at::parallel_for, and safe install/uninstall with
// tensors crossing over. Each test installs the pool itself (the test binary does not) and restores
// the default state at the end. Bit-identical training with and without the pool and the steady-
// state allocation count are in tests/kernels/training_memory_test.cpp (they need nn/).
#include "xtrain/base/memory_pool.h"

#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace xtrain::memory_pool::memory_pool_test {
namespace {

base::MemoryPoolOptions defaults() { return {}; }

struct PoolScope {  // installs with `o`, restores "not installed" (the test binary's state)
  explicit PoolScope(base::MemoryPoolOptions o = defaults()) { install(o); }
  ~PoolScope() {
    install(defaults());
    release_cached();
    base::MemoryPoolOptions off;
    off.enabled = false;
    install(off);
  }
};

// The VmFlags line of the /proc/self/smaps mapping that contains `p`.
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= addr && addr < hi;
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(MemoryPool, SizeClassesAreMultiplesOf64AndAtMostAQuarterLarger) {
  EXPECT_EQ(size_class_bytes(1), 64);
  EXPECT_EQ(size_class_bytes(64), 64);
  EXPECT_EQ(size_class_bytes(65), 128);
  EXPECT_EQ(size_class_bytes(4096), 4096);
  EXPECT_EQ(size_class_bytes(4097), 5120);
  EXPECT_EQ(size_class_bytes(1 << 20), 1 << 20);
  for (int64_t n = 1; n < (int64_t{1} << 34); n = n * 3 / 2 + 7) {
    const int64_t c = size_class_bytes(n);
    ASSERT_GE(c, n);
    ASSERT_EQ(c % 64, 0) << n;
    if (n > 4096) {
      ASSERT_LE(c, n + n / 4 + 1) << n;
    }
  }
}

TEST(MemoryPool, FreedBlockComesBackForTheSameSizeWithoutTheOs) {
  PoolScope pool;
  ASSERT_TRUE(installed());
  const void* first = nullptr;
  {
    auto t = at::empty({1 << 20});  // 4 MiB
    first = t.data_ptr();
  }
  const auto before = stats();
  auto again = at::empty({1 << 20});
  const auto after = stats();
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(after.cache_hits - before.cache_hits, 1);
  EXPECT_EQ(after.os_allocations, before.os_allocations);
  EXPECT_EQ(after.faults_avoided - before.faults_avoided, (4 << 20) / 4096 + 1);  // data pages + the header's
  // A request in the same size class reuses it too (4 MiB - 1000 bytes rounds up to 4 MiB).
  const void* p = again.data_ptr();
  again.reset();
  auto similar = at::empty({(1 << 20) - 250});
  EXPECT_EQ(similar.data_ptr(), p);
}

TEST(MemoryPool, BlocksAre64ByteAlignedAndBigOnesAdvisedHugePages) {
  PoolScope pool;
  for (int64_t n : {1, 3, 17, 64, 1000, 4097, 100000, 1 << 18, 3 << 20}) {
    auto t = at::empty({n}, at::kByte);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u) << n << " bytes";
  }
  auto big = at::empty({4 << 20}, at::kByte);
  const auto flags = vm_flags_of(big.data_ptr());
  ASSERT_FALSE(flags.empty());
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;  // MADV_HUGEPAGE
  big.fill_(1);  // the mapping is usable end to end
  EXPECT_EQ(big.sum().item<int64_t>(), int64_t{4} << 20);
}

TEST(MemoryPool, CapSendsFreedBlocksBeyondItBackToTheOs) {
  base::MemoryPoolOptions o;
  o.max_cached_mb = 1;
  PoolScope pool(o);
  release_cached();
  const auto before = stats();
  { auto big = at::empty({1 << 20}); }       // 4 MiB > cap: released
  { auto small = at::empty({64 << 10}); }    // 256 KiB: kept
  const auto after = stats();
  EXPECT_EQ(after.os_releases - before.os_releases, 1);
  EXPECT_EQ(after.bytes_cached, 256 << 10);
  // Lowering the cap applies at once.
  o.max_cached_mb = 0;
  install(o);
  EXPECT_EQ(stats().bytes_cached, 0);
}

TEST(MemoryPool, StatisticsTrackInUseCachedPeakAndRelease) {
  PoolScope pool;
  release_cached();
  reset_peak();
  const auto base = stats();
  auto a = at::empty({256 << 10});  // 1 MiB
  auto b = at::empty({512 << 10});  // 2 MiB
  auto s = stats();
  EXPECT_EQ(s.bytes_in_use - base.bytes_in_use, 3 << 20);
  EXPECT_GE(s.peak_bytes_in_use, base.bytes_in_use + (3 << 20));
  a.reset();
  s = stats();
  EXPECT_EQ(s.bytes_in_use - base.bytes_in_use, 2 << 20);
  EXPECT_EQ(s.bytes_cached, 1 << 20);
  EXPECT_GE(s.peak_bytes_reserved, s.bytes_in_use + s.bytes_cached);
  EXPECT_GE(s.os_allocations_at_least(2 << 20), 1);
  b.reset();
  EXPECT_EQ(release_cached(), 3 << 20);
  EXPECT_EQ(stats().bytes_cached, 0);
  EXPECT_NE(describe(stats()).find("MB in use"), std::string::npos);
}

TEST(MemoryPool, ThreadSafeUnderParallelFor) {
  PoolScope pool;
  const int saved = at::get_num_threads();
  at::set_num_threads(4);  // more threads than cores: interleavings happen
  const auto before = stats();
  std::atomic<int64_t> bad{0};
  at::parallel_for(0, 400, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t n = 1 + (i * 7919) % (300 << 10);  // 8 B .. 2.4 MB of int64
      auto t = at::full({n}, i, at::kLong);
      auto u = at::empty({n / 2 + 1}).fill_(-1.0);
      if (t.sum().item<int64_t>() != i * n || u.min().item<double>() != -1.0) ++bad;
    }
  });
  at::set_num_threads(saved);
  EXPECT_EQ(bad.load(), 0);
  const auto after = stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);  // everything came back
  EXPECT_GT(after.allocations - before.allocations, 800);
}

TEST(MemoryPool, TensorsCrossInstallAndUninstall) {
  auto from_default = at::ones({1 << 16});
  PoolScope pool;
  auto from_pool = at::ones({1 << 16});
  from_default.reset();  // freed by the default allocator's deleter while the pool is installed
  base::MemoryPoolOptions off;
  off.enabled = false;
  install(off);
  EXPECT_FALSE(installed());
  EXPECT_EQ(from_pool.sum().item<double>(), 1 << 16);
  from_pool.reset();  // freed into the pool after uninstall
  auto again = at::ones({10});
  EXPECT_EQ(again.sum().item<double>(), 10);
}

}  // namespace
}  // namespace xtrain::memory_pool::memory_pool_test
