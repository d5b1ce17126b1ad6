// Memory metrics: RSS follows memory the test touches; the peak never trails the current value.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "xtrain/monitor/memory.h"

namespace xtrain::monitor::memory_test {
namespace {

TEST(Memory, RssSeesTouchedPages) {
  const int64_t before = rss_bytes();
  ASSERT_GT(before, 0);
  std::vector<char> block(64 << 20);
  std::memset(block.data(), 1, block.size());  // touch every page
  const int64_t after = rss_bytes();
  EXPECT_GE(after - before, 48 << 20) << "64 MiB touched; other threads may free a little meanwhile";
  EXPECT_GE(peak_rss_bytes(), after - (1 << 20));  // ru_maxrss and statm round differently
  const auto m = memory_metrics({{"params", 3 << 20}});
  EXPECT_GT(m.at("memory/rss_mb"), 64.0);
  EXPECT_DOUBLE_EQ(m.at("memory/params_mb"), 3.0);
  EXPECT_TRUE(m.count("memory/peak_rss_mb"));
  EXPECT_EQ(block[12345], 1);
}

}  // namespace
}  // namespace xtrain::monitor::memory_test
