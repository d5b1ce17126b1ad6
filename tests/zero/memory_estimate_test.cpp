// The ZeRO formulas against the paper's own numbers (Table 1 / Figure 1: Ψ = 7.5B, N = 64, mixed-
// precision Adam): 120 GB, 31.4 GB, 16.6 GB, 1.88 GB per device for stages 0-3.
#include <gtest/gtest.h>

#include "xtrain/zero/memory_estimate.h"

namespace xtrain::zero::memory_estimate_test {
namespace {

TEST(MemoryEstimate, MatchesTheZeroPaper) {
  const int64_t psi = 7500000000LL;
  const double gb = 1e9;
  EXPECT_NEAR(estimate_memory(0, psi, 64, 2, 2).total() / gb, 120.0, 0.05);
  EXPECT_NEAR(estimate_memory(1, psi, 64, 2, 2).total() / gb, 31.4, 0.05);
  EXPECT_NEAR(estimate_memory(2, psi, 64, 2, 2).total() / gb, 16.6, 0.05);
  EXPECT_NEAR(estimate_memory(3, psi, 64, 2, 2).total() / gb, 1.875, 0.005);
  // fp32 training: the parameters are the master weights (no separate copy).
  EXPECT_EQ(estimate_memory(0, 1000, 1, 4, 2).total(), 16 * 1000);
  EXPECT_EQ(estimate_memory(2, 1000, 4, 4, 2).total(), 4 * 1000 + (4 + 8) * 1000 / 4);
}

}  // namespace
}  // namespace xtrain::zero::memory_estimate_test
