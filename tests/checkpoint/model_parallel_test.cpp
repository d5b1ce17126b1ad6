// The on-disk layout of model-parallel checkpoints: scope names, model_parallel.json round trip,
// the size check on resume, and merging 2 tensor × 2 pipeline ranks with the consolidate and
// unshard steps injected (a closed form: pieces concatenated along the manifest's dimension, the
// tied key taken from the first stage that holds it, keys in rank 0's order).
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/model_parallel.h"

namespace xtrain::checkpoint::model_parallel_test {
namespace {

ModelParallelManifest two_by_two() {
  ModelParallelManifest m;
  m.tensor_parallel = 2;
  m.pipeline = 2;
  m.data_parallel = 3;
  m.order = "tp-dp-pp";
  m.shards["wte.weight"] = {0, 1};
  m.shards["blocks.1.fc.weight"] = {1, 3};
  return m;
}

// Stage s, tensor rank t: "wte.weight" (rows 2t, 2t+1 of an arange; on both stages, the last
// stage's copy offset by 100 so a wrong pick shows) and one block per stage, "ln.weight" replicated.
std::string write_ranks(const ModelParallelManifest& m) {
  const std::string root = testing::temp_dir("mp_ckpt");
  CheckpointWriter w(root, "global_step1", 0);
  for (int64_t s = 0; s < 2; ++s) {
    for (int64_t t = 0; t < 2; ++t) {
      w.set_scope(model_parallel_scope(t, s));
      const at::Tensor wte = at::arange(4 * t, 4 * t + 4, at::kFloat).reshape({2, 2}).add(100.0 * s);
      const at::Tensor fc = at::arange(2, at::kFloat).reshape({1, 2}).add(10.0 * t + 1000.0 * s);
      w.write_tensors("model.pt", {{"wte.weight", wte}, {c10::str("blocks.", s, ".fc.weight"), fc},
                                   {"ln.weight", at::arange(3, at::kFloat)}});
    }
  }
  w.set_scope("");
  write_model_parallel_manifest(w, m);
  w.write_text("config.json", "{}");
  w.finish_rank();
  w.commit();
  return root;
}

MergeSteps steps() {
  MergeSteps s;
  s.consolidate = [](const CheckpointReader& scope, bool) { return MergedTensors{scope.read_tensors("model.pt"), {}}; };
  s.unshard = [](const std::vector<at::Tensor>& pieces, const TensorSplit& split, const std::string&) {
    return split.dim < 0 ? pieces.front() : at::cat(pieces, split.dim);
  };
  return s;
}

TEST(ModelParallelCheckpoint, ScopeNamesAreMegatrons) {
  EXPECT_EQ(model_parallel_scope(0, 0), "mp_rank_00_000_");
  EXPECT_EQ(model_parallel_scope(1, 12), "mp_rank_01_012_");
}

TEST(ModelParallelCheckpoint, ManifestRoundTripsAndChecksSizes) {
  const auto m = two_by_two();
  CheckpointReader reader(write_ranks(m));
  const auto j = nlohmann::json::parse(reader.read_text("model_parallel.json"));
  EXPECT_EQ(j.at("tensor_parallel"), 2);
  EXPECT_EQ(j.at("data_parallel"), 3);
  EXPECT_EQ(j.at("shards").at("blocks.1.fc.weight").at("stride"), 3);
  const auto back = read_model_parallel_manifest(reader);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->pipeline, 2);
  EXPECT_EQ(back->order, "tp-dp-pp");
  EXPECT_EQ(back->shards.at("wte.weight").dim, 0);
  EXPECT_EQ(back->shards.size(), 2u);
  EXPECT_NO_THROW(check_model_parallel_manifest(reader, 2, 2));
  try {
    check_model_parallel_manifest(reader, 1, 1);
    FAIL() << "sizes 1 and 1 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel.size 2 and pipeline.stages 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(model_parallel_rank0(reader).files(), std::vector<std::string>{"model.pt"});
  EXPECT_TRUE(is_run_file("config.json"));
  EXPECT_FALSE(is_run_file("model_parallel.json"));
  EXPECT_FALSE(is_run_file("mp_rank_00_000_model.pt"));
}

TEST(ModelParallelCheckpoint, MergeJoinsTensorPiecesAndTakesTheFirstStagesTiedCopy) {
  const auto m = two_by_two();
  CheckpointReader reader(write_ranks(m));
  const auto merged = merge_model_parallel(reader, m, false, steps());
  ASSERT_EQ(merged.model.size(), 4u);
  std::vector<std::string> names;
  for (const auto& [name, t] : merged.model) names.push_back(name);
  // Rank (0, 0)'s file order (sorted by name within model.pt), then stage 1's new key.
  std::vector<std::string> expect_names;
  for (const auto& [name, t] : reader.scoped(model_parallel_scope(0, 0)).read_tensors("model.pt")) {
    expect_names.push_back(name);
  }
  expect_names.push_back("blocks.1.fc.weight");
  EXPECT_EQ(names, expect_names);
  for (const auto& [name, t] : merged.model) {
    if (name == "wte.weight") {
      EXPECT_TRUE(at::equal(t, at::arange(8, at::kFloat).reshape({4, 2}))) << t;
    } else if (name == "ln.weight") {
      EXPECT_TRUE(at::equal(t, at::arange(3, at::kFloat))) << t;
    } else if (name == "blocks.1.fc.weight") {  // stride-3 split on dim 1, joined by the injected cat
      const std::vector<at::Tensor> pieces = {at::arange(2, at::kFloat).add(1000), at::arange(2, at::kFloat).add(1010)};
      EXPECT_TRUE(at::equal(t, at::cat(pieces).reshape({1, 4}))) << t;
    }
  }
}

TEST(ModelParallelCheckpoint, MissingTensorPieceIsNamed) {
  auto m = two_by_two();
  CheckpointReader reader(write_ranks(m));
  m.tensor_parallel = 3;  // the files hold 2 tensor ranks; scope 2 has nothing
  auto s = steps();
  s.consolidate = [](const CheckpointReader& scope, bool) {
    return scope.has_file("model.pt") ? MergedTensors{scope.read_tensors("model.pt"), {}} : MergedTensors{};
  };
  try {
    merge_model_parallel(reader, m, false, s);
    FAIL() << "a missing piece merged";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("has 2 tensor-parallel shards, expected 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xtrain::checkpoint::model_parallel_test
