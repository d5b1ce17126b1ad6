// checkpoint.tag_validation (DeepSpeed's Ignore / Warn / Fail, any case): two ranks first save one
// good checkpoint with the same tag, then each saves a tag of its own. Fail: both ranks throw,
// naming each rank's tag, before writing anything, so `latest` and the good checkpoint are intact.
// Warn: the save goes ahead with a warning naming the tags. Ignore: no check and no warning.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"

namespace xtrain::checkpoint_tag_validation_test {
namespace {

std::unique_ptr<Engine> make_engine(const std::string& mode, std::shared_ptr<comm::Communicator> dp) {
  config::LoadOptions lo;
  lo.quiet = true;
  lo.world_size = dp->size();
  const auto cfg = config::load_text(
      R"({"train_micro_batch_size_per_gpu": 1, "checkpoint": {"tag_validation": ")" + mode + "\"}}", lo).config;
  torch::manual_seed(5);
  zero::NamedParams params = {{"w", at::randn({3, 2}).requires_grad_(true)}};
  auto loss_fn = [params](const data::Batch& b) { return at::linear(b.input, params[0].second).sum(); };
  return std::make_unique<Engine>(params, loss_fn, cfg, dp);
}

// Every rank saves `tag` (all ranks the same) and rank 0 commits it.
void save_common(Engine& engine, comm::Communicator& dp, const std::string& root, const std::string& tag) {
  checkpoint::CheckpointWriter writer(root, tag, dp.rank());
  engine.save_checkpoint(writer);
  writer.finish_rank();
  dp.barrier();
  if (dp.rank() == 0) writer.commit("{}", dp.size());
  dp.barrier();
}

// This rank saves its own tag; returns stderr, or the error message prefixed by "threw: ".
std::string save_own_tag(Engine& engine, int rank, const std::string& root) {
  checkpoint::CheckpointWriter writer(root, "step-r" + std::to_string(rank), rank);
  ::testing::internal::CaptureStderr();
  try {
    engine.save_checkpoint(writer);
  } catch (const UsageError& e) {
    ::testing::internal::GetCapturedStderr();
    return std::string("threw: ") + e.what();
  }
  return ::testing::internal::GetCapturedStderr();
}

TEST(TagValidationWorker, ThreeModes) {
  XTRAIN_WORKER_ONLY();
  const auto info = comm::rank_info_from_env();
  comm::CommOptions co;
  co.timeout_seconds = 60;
  auto dp = comm::Communicator::create(info, co);
  const std::string base = testing::worker_env("TAGV_ROOT");
  const std::string names = "'step-r0' on rank 0; 'step-r1' on rank 1";
  for (const std::string mode : {"FAIL", "warn", "Ignore"}) {
    const std::string root = base + "/" + mode;
    auto engine = make_engine(mode, dp);
    save_common(*engine, *dp, root, "good");
    const std::string fingerprint = checkpoint::fingerprint(root);
    const std::string out = save_own_tag(*engine, info.rank, root);
    dp->barrier();
    if (mode == "FAIL") {
      EXPECT_EQ(out.rfind("threw: ", 0), 0u) << out;
      EXPECT_NE(out.find(names), std::string::npos) << out;
      EXPECT_NE(out.find("checkpoint.tag_validation is \"Fail\""), std::string::npos) << out;
      EXPECT_EQ(checkpoint::latest_tag(root), "good");
      EXPECT_EQ(checkpoint::fingerprint(root), fingerprint);  // verifies every checksum too
      EXPECT_EQ(checkpoint::list_tags(root), std::vector<std::string>{"good"});
    } else if (mode == "warn") {
      EXPECT_EQ(out.rfind("threw: ", 0), std::string::npos) << out;
      EXPECT_NE(out.find(names), std::string::npos) << "no warning naming the tags:\n" << out;
    } else {
      EXPECT_EQ(out.rfind("threw: ", 0), std::string::npos) << out;
      EXPECT_EQ(out.find("different tags"), std::string::npos) << out;
    }
    // The same tag on both ranks passes in every mode.
    save_common(*engine, *dp, root, "again");
    EXPECT_EQ(checkpoint::latest_tag(root), "again");
  }
}

TEST(TagValidation, TwoRanksSavingDifferentTagsFailWarnOrPass) {
  const std::string root = testing::binary_dir() + "/tag_validation_test";
  std::filesystem::remove_all(root);
  testing::WorkerOptions o;
  o.world_size = 2;
  o.timeout_s = 120;
  o.env = {{"TAGV_ROOT", root}};
  testing::expect_workers_ok(testing::run_workers("TagValidationWorker.ThreeModes", o));
  std::filesystem::remove_all(root);
}

TEST(TagValidation, ModeIsMatchedInAnyCase) {
  config::LoadOptions lo;
  lo.quiet = true;
  auto mode = [&](const std::string& v) {
    return config::load_text(R"({"checkpoint": {"tag_validation": ")" + v + "\"}}", lo).config.checkpoint.tag_validation;
  };
  EXPECT_EQ(mode("FAIL"), "Fail");
  EXPECT_EQ(mode("wArN"), "Warn");
  EXPECT_EQ(mode("ignore"), "Ignore");
  EXPECT_EQ(config::load_text("{}", lo).config.checkpoint.tag_validation, "Warn");
  try {
    mode("Strict");
    ADD_FAILURE() << "an unknown mode was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.tag_validation"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xtrain::checkpoint_tag_validation_test
