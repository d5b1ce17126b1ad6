// Node-local checkpoint parts (checkpoint.use_node_local_storage): two "nodes" each commit their
// rank's files under their own root (commit_ranks); gathering them gives the checkpoint one writer
// makes with every file (same fingerprint: the reference is written independently of the gather),
// and a missing node, a node given twice, mixed tags, or one part alone are errors saying what.
#include <ATen/ops/arange.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/node_parts.h"
#include "xtrain/checkpoint/store.h"

namespace xtrain::checkpoint::node_parts_test {
namespace {

NamedTensors rank_tensors(int rank) { return {{c10::str("w", rank), at::arange(4, at::kFloat).add(rank)}}; }

std::string extra(int node) {
  nlohmann::json j;
  j["node_local"] = {{"node", node}, {"nodes", 2}, {"ranks", {node}}};
  if (node == 0) j["node_local"]["ranks_by_node"] = {{0}, {1}};
  return j.dump();
}

// Node `node`'s part of `tag` under dir/node<node> (rank `node` writes, then commits its node).
std::string write_part(const std::string& dir, int node, const std::string& tag = "global_step2") {
  const std::string root = dir + "/node" + std::to_string(node);
  CheckpointWriter w(root, tag, node);
  w.write_tensors(c10::str("zero_rank_", node, ".pt"), rank_tensors(node));
  if (node == 0) w.write_text("config.json", "{}");
  w.finish_rank();
  w.commit_ranks(extra(node), {node});
  return root + "/" + tag;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(NodeParts, GatheredPartsEqualOneWritersCheckpoint) {
  const std::string dir = testing::temp_dir("node-parts");
  const std::string p0 = write_part(dir, 0), p1 = write_part(dir, 1);
  EXPECT_EQ(CheckpointReader(dir + "/node1").files(), std::vector<std::string>{"zero_rank_1.pt"});
  const auto info = node_part_info(CheckpointReader(dir + "/node1"));
  ASSERT_TRUE(info);
  EXPECT_EQ(info->node, 1);
  EXPECT_EQ(info->nodes, 2);
  CheckpointWriter whole(dir + "/whole", "global_step2", 0);
  for (int r = 0; r < 2; ++r) whole.write_tensors(c10::str("zero_rank_", r, ".pt"), rank_tensors(r));
  whole.write_text("config.json", "{}");
  whole.commit();
  EXPECT_EQ(fingerprint_nodes({p0, p1}), fingerprint(dir + "/whole"));
  EXPECT_EQ(fingerprint_nodes({dir + "/node1", dir + "/node0"}), fingerprint(dir + "/whole"));  // any order
  const std::string gathered = gather_node_parts({CheckpointReader(dir + "/node0"), CheckpointReader(dir + "/node1")},
                                                 dir + "/gathered");
  const CheckpointReader g(dir + "/gathered");
  EXPECT_EQ(g.files().size(), 3u);
  EXPECT_FALSE(node_part_info(g));  // whole now: fingerprint and consolidate take it alone
  EXPECT_NE(g.extra_json().find("gathered_from_nodes"), std::string::npos) << g.extra_json();
  EXPECT_EQ(gathered, dir + "/gathered/global_step2");
}

TEST(NodeParts, MissingDuplicateOrMixedPartsAreErrors) {
  const std::string dir = testing::temp_dir("node-parts-bad");
  const std::string p0 = write_part(dir, 0), p1 = write_part(dir, 1);
  std::string e = error_of([&] { fingerprint(p0); });
  EXPECT_NE(e.find("is node 0's part of 2 (checkpoint.use_node_local_storage)"), std::string::npos) << e;
  e = error_of([&] { gather_node_parts({CheckpointReader(dir + "/node0")}, dir + "/out1"); });
  EXPECT_NE(e.find("node(s) 1 of 2 missing"), std::string::npos) << e;
  e = error_of([&] { fingerprint_nodes({p1, p1}); });
  EXPECT_NE(e.find("node 1's part given twice"), std::string::npos) << e;
  const std::string other = write_part(dir + "/later", 1, "global_step4");
  e = error_of([&] { fingerprint_nodes({p0, other}); });
  EXPECT_NE(e.find("different tags"), std::string::npos) << e;
}

}  // namespace
}  // namespace xtrain::checkpoint::node_parts_test
