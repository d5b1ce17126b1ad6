// ProcessGrid against closed forms: Megatron-core's documented 16-GPU example (tp 2, pp 4, dp 2 in
// parallel_state.py's docstring), the DP-only grid, and round trips rank -> coord -> rank.
#include <gtest/gtest.h>

#include "xtrain/base/error.h"
#include "xtrain/topology/process_grid.h"

namespace xtrain::topology::process_grid_test {
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

// Hand-computed tables (rank -> coordinates worked out on paper from the strides the order gives).
TEST(ProcessGrid, TwoByTwoByTwoTable) {
  const ProcessGrid g(8, /*tp=*/2, /*pp=*/2, "tp-dp-pp");  // strides: tp 1, dp 2, pp 4
  const std::vector<Coord> table = {{0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1},
                                    {0, 1, 0}, {0, 1, 1}, {1, 1, 0}, {1, 1, 1}};  // {dp, pp, tp}
  for (int64_t r = 0; r < 8; ++r) {
    EXPECT_EQ(g.coord(r), table[r]) << r;
    EXPECT_EQ(g.rank(table[r]), r);
  }
  EXPECT_EQ(g.groups(Axis::kTensor), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(Axis::kData), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.groups(Axis::kPipeline), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.groups({Axis::kTensor, Axis::kPipeline}), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(g.groups({Axis::kData, Axis::kTensor}), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.embedding_groups(), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.next_stage_rank(0), 4);
  EXPECT_EQ(g.next_stage_rank(4), 0);  // wraps
  EXPECT_EQ(g.prev_stage_rank(5), 1);
  EXPECT_TRUE(g.is_first_stage(3));
  EXPECT_TRUE(g.is_last_stage(6));
  EXPECT_FALSE(g.is_last_stage(2));
}

TEST(ProcessGrid, TensorThreePipelineTwoWithDataOutermost) {
  const ProcessGrid g(12, /*tp=*/3, /*pp=*/2, "tp-pp-dp");  // strides: tp 1, pp 3, dp 6
  EXPECT_EQ(g.size(Axis::kData), 2);
  EXPECT_EQ(g.coord(7), (Coord{1, 0, 1}));
  EXPECT_EQ(g.coord(5), (Coord{0, 1, 2}));
  EXPECT_EQ(g.groups(Axis::kTensor), (Groups{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}}));
  EXPECT_EQ(g.groups(Axis::kPipeline), (Groups{{0, 3}, {1, 4}, {2, 5}, {6, 9}, {7, 10}, {8, 11}}));
  EXPECT_EQ(g.groups(Axis::kData), (Groups{{0, 6}, {1, 7}, {2, 8}, {3, 9}, {4, 10}, {5, 11}}));
  EXPECT_EQ(g.groups({Axis::kTensor, Axis::kPipeline}), (Groups{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}));
  EXPECT_EQ(g.next_stage_rank(7), 10);
  EXPECT_EQ(g.prev_stage_rank(7), 10);  // two stages: both neighbours are the other stage
}

TEST(ProcessGrid, PipelineFourDataTwo) {
  const ProcessGrid g(8, /*tp=*/1, /*pp=*/4, "tp-dp-pp");  // strides: dp 1, pp 2
  EXPECT_EQ(g.groups(Axis::kPipeline), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(g.groups(Axis::kData), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups(Axis::kTensor), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(g.embedding_groups(), (Groups{{0, 6}, {1, 7}}));
  const std::vector<int64_t> next = {2, 3, 4, 5, 6, 7, 0, 1}, prev = {6, 7, 0, 1, 2, 3, 4, 5};
  for (int64_t r = 0; r < 8; ++r) {
    EXPECT_EQ(g.next_stage_rank(r), next[r]) << r;
    EXPECT_EQ(g.prev_stage_rank(r), prev[r]) << r;
    EXPECT_EQ(g.pipeline_peer(r, 4), r) << r;
  }
}

TEST(ProcessGrid, PipelineFastestOrder) {
  const ProcessGrid g(6, /*tp=*/1, /*pp=*/3, "pp-dp-tp");  // strides: pp 1, dp 3
  EXPECT_EQ(g.groups(Axis::kPipeline), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(g.groups(Axis::kData), (Groups{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(g.embedding_groups(), (Groups{{0, 2}, {3, 5}}));
  EXPECT_EQ(g.axis_rank(Axis::kPipeline, 4), 1);
  EXPECT_EQ(g.axis_rank(Axis::kData, 4), 1);
  EXPECT_EQ(ProcessGrid(4, /*tp=*/2, /*pp=*/1).embedding_groups(), (Groups{{0}, {1}, {2}, {3}}));
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
}  // namespace xtrain::topology::process_grid_test
