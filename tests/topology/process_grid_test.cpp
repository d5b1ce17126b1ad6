// ProcessGrid against closed forms: Megatron-core's documented 16-GPU example (tp 2, pp 4, dp 2 in
// parallel_state.py's docstring), the DP-only grid, and round trips rank -> coord -> rank.
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/topology/process_grid.h"

namespace xtrain::topology {
namespace {

using Groups = std::vector<std::vector<int64_t>>;

TEST(ProcessGrid, DataParallelOnlyIsOneGroupOfEveryRank) {
  const auto g = ProcessGrid::data_parallel(4);
  EXPECT_EQ(g.size(Axis::kData), 4);
  EXPECT_EQ(g.groups(Axis::kData), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(g.groups(Axis::kTensor), (Groups{{0}, {1}, {2}, {3}}));
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(g.axis_rank(Axis::kData, r), r);
  EXPECT_EQ(ProcessGrid::data_parallel(1).groups(Axis::kData), (Groups{{0}}));
}

TEST(ProcessGrid, MegatronSixteenGpuExample) {
  // Megatron: "tensor model-parallel groups [g0,g1] [g2,g3] ... pipeline model-parallel groups
  // [g0,g4,g8,g12] ... data parallel groups [g0,g2] [g1,g3] [g4,g6] ..." with order tp-dp-pp.
  const ProcessGrid g(16, /*tp=*/2, /*pp=*/4, "tp-dp-pp");
  EXPECT_EQ(g.size(Axis::kData), 2);
  EXPECT_EQ(g.groups(Axis::kTensor),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(g.groups(Axis::kPipeline), (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(g.groups(Axis::kData),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  // Model-parallel group (tp x pp) of rank 2: everything with dp coordinate 1 and tp in {0,1}.
  EXPECT_EQ(g.group({Axis::kTensor, Axis::kPipeline}, 2), (std::vector<int64_t>{2, 3, 6, 7, 10, 11, 14, 15}));
}

TEST(ProcessGrid, OrderStringChangesWhichAxisIsContiguous) {
  const ProcessGrid g(8, /*tp=*/2, /*pp=*/2, "dp-tp-pp");  // dp fastest: dp peers are neighbours
  EXPECT_EQ(g.groups(Axis::kData), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(Axis::kTensor), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(Axis::kPipeline), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(ProcessGrid, CoordinatesRoundTripAndGroupsPartitionTheWorld) {
  for (const char* order : {"tp-dp-pp", "pp-tp-dp", "dp-pp-tp"}) {
    const ProcessGrid g(24, 2, 3, order);
    for (int64_t r = 0; r < 24; ++r) EXPECT_EQ(g.rank(g.coord(r)), r) << order;
    for (Axis a : {Axis::kData, Axis::kPipeline, Axis::kTensor}) {
      int64_t covered = 0;
      for (const auto& grp : g.groups(a)) {
        EXPECT_EQ(static_cast<int64_t>(grp.size()), g.size(a));
        for (size_t i = 0; i < grp.size(); ++i) EXPECT_EQ(g.axis_rank(a, grp[i]), static_cast<int64_t>(i));
        covered += grp.size();
      }
      EXPECT_EQ(covered, 24);
    }
  }
}

TEST(ProcessGrid, BadSizesAndOrdersNameTheKey) {
  try {
    ProcessGrid(6, 4, 1);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel.size (4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ProcessGrid(4, 1, 1, "tp-dp"), UsageError);
  EXPECT_THROW(ProcessGrid(4, 1, 1, "tp-dp-dp"), UsageError);
  EXPECT_THROW(ProcessGrid(4, 1, 1, "tp-xp-pp"), UsageError);
}

}  // namespace
}  // namespace xtrain::topology
