// ZeRO stage 3's construction into file-backed memory (zero/offload/disk_backed_allocations.h):
// large blocks made under the guard are file mappings in the NVMe folder, a GPT built so equals one
// built normally, and the NVMe space checks credit every local rank's construction blocks.
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "support/fixtures.h"
#include "support/paths.h"
#include "xtrain/models/gpt.h"
#include "xtrain/zero/offload/disk_backed_allocations.h"

namespace xtrain::zero_stage3_memory_test {
namespace {

models::ModelOptions small_gpt_options() {
  models::ModelOptions o;
  o.layers = 3, o.d_model = 32, o.heads = 2, o.seq_len = 16, o.vocab = 40, o.dropout = 0.0;
  return o;
}

bool mapped_from(const void* p, const std::string& dir) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || addr < lo || addr >= hi) continue;
    return line.find(dir) != std::string::npos;
  }
  return false;
}

// Blocks of at least min_bytes made while the guard lives are file-backed mappings in the folder;
// smaller ones and later ones are not; a GPT built under the guard has the same parameters as one
// built normally.
TEST(ZeroStage3, ModelBuiltIntoFileBackedMemory) {
  const auto dir = testing::temp_dir("zero3_construct");
  at::Tensor big, small;
  {
    zero::DiskBackedAllocations guard(dir, 1 << 20);
    big = at::ones({1 << 19}, at::kFloat);  // 2 MiB
    small = at::ones({1000}, at::kFloat);
    EXPECT_EQ(guard.blocks(), 1);
  }
  auto after = at::ones({1 << 19}, at::kFloat);
  EXPECT_TRUE(mapped_from(big.data_ptr(), dir));
  EXPECT_FALSE(mapped_from(small.data_ptr(), dir));
  EXPECT_FALSE(mapped_from(after.data_ptr(), dir));
  EXPECT_EQ(big.sum().item<double>(), 1 << 19);
  const void* p = big.data_ptr();
  big = at::Tensor();
  EXPECT_FALSE(mapped_from(p, dir)) << "unmapped when freed";

  {
    std::optional<models::GPT> gpt;
    {
      zero::DiskBackedAllocations guard(dir, 4096);
      torch::manual_seed(7);
      gpt.emplace(small_gpt_options());
      EXPECT_GT(guard.blocks(), 0);
    }
    EXPECT_TRUE(mapped_from((*gpt)->blocks[0]->as<nn::BlockImpl>()->mlp->parameters()[0].data_ptr(), dir));
    torch::manual_seed(7);
    const models::GPT plain(small_gpt_options());
    const auto built = (*gpt)->named_parameters(), expected = plain->named_parameters();
    ASSERT_EQ(built.size(), expected.size());
    for (const auto& item : expected) {
      testing::expect_equal(built[item.key()], item.value(), "GPT built into file-backed memory: " + item.key());
    }
  }
}

// The NVMe space checks count the construction blocks as space partitioning gives back, for every
// local rank (each builds the same model under the same path at the same time).
TEST(ZeroStage3, ConstructionCreditCountsEveryLocalRank) {
  const auto dir = testing::temp_dir("zero3_credit");
  zero::DiskBackedAllocations guard(dir, 1 << 20);
  const auto block = at::ones({1 << 20}, at::kFloat);  // 4 MiB, file-backed
  EXPECT_EQ(zero::disk_backed_live_bytes(), 4 << 20);
  ::setenv("LOCAL_WORLD_SIZE", "3", 1);
  EXPECT_EQ(zero::disk_backed_bytes_freed_on_node(), 3 * (4 << 20));
  ::unsetenv("LOCAL_WORLD_SIZE");
  EXPECT_EQ(zero::disk_backed_bytes_freed_on_node(), 4 << 20);
}

}  // namespace
}  // namespace xtrain::zero_stage3_memory_test
