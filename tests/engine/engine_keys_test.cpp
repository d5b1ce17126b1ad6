// Config keys the engine and the trainer's setup honour (issue 21, "nothing silently ignored"):
// memory_breakdown prints the step's memory lines only when set; tensor_parallel.autotp_size is the
// tensor-parallel size under DeepSpeed's name; tf32.enabled sets CUDA's TF32 switches in a CUDA
// build. (checkpoint.use_node_local_storage across nodes: tests/cli/node_local_test.cpp.)
#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "xtrain/base/error.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/run/run_checks.h"

namespace xtrain::engine_keys_test {
namespace {

config::Config load(const std::string& extra, int64_t world_size = 1) {
  config::LoadOptions lo;
  lo.quiet = true;
  lo.world_size = world_size;
  return config::load_text("{\"train_micro_batch_size_per_gpu\": 2" + extra + "}", lo).config;
}

// A two-parameter linear model and one optimizer step (one micro-batch); stderr of the step.
std::string step_output(const config::Config& cfg) {
  torch::manual_seed(3);
  zero::NamedParams params = {{"w", at::randn({4, 3}).requires_grad_(true)}, {"b", at::zeros({4}).requires_grad_(true)}};
  auto loss_fn = [params](const data::Batch& b) {
    return at::cross_entropy_loss(at::linear(b.input, params[0].second, params[1].second), b.target);
  };
  Engine engine(params, loss_fn, cfg);
  ::testing::internal::CaptureStderr();
  engine.backward(engine.forward({at::randn({2, 3}), at::randint(4, {2})}));
  engine.step();
  return ::testing::internal::GetCapturedStderr();
}

TEST(EngineKeys, MemoryBreakdownPrintsEachStageOfTheStep) {
  const std::string on = step_output(load(R"(, "memory_breakdown": true)"));
  for (const char* stage : {"memory after forward: rss ", "memory after backward: rss ",
                            "memory after optimizer step: rss "}) {
    EXPECT_NE(on.find(stage), std::string::npos) << "missing '" << stage << "' in:\n" << on;
  }
  // xtrain's per-area bytes: 16 fp32 parameters = 64 bytes, printed as 0.0 MiB; the names matter.
  EXPECT_NE(on.find("| params "), std::string::npos) << on;
  EXPECT_NE(on.find("| grads "), std::string::npos) << on;
  EXPECT_NE(on.find("| optimizer "), std::string::npos) << on;
  const std::string off = step_output(load(R"(, "memory_breakdown": false)"));
  EXPECT_EQ(off.find("memory after"), std::string::npos) << off;
}

TEST(EngineKeys, AutotpSizeIsTheTensorParallelSize) {
  const auto cfg = load(R"(, "tensor_parallel": {"autotp_size": 2})", /*world_size=*/4);
  EXPECT_EQ(cfg.tensor_parallel.size, 2);
  EXPECT_EQ(cfg.dp_world_size, 2);  // 4 ranks = 2 tensor-parallel x 2 data-parallel
  EXPECT_EQ(load(R"(, "tensor_parallel": {"autotp_size": 2, "size": 2})", 2).dp_world_size, 1);
  EXPECT_EQ(load(R"(, "tensor_parallel": {"autotp_size": 0})", 2).tensor_parallel.size, 1);
  try {
    load(R"(, "tensor_parallel": {"autotp_size": 2, "size": 4})", 4);
    ADD_FAILURE() << "conflicting sizes accepted";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tensor_parallel.autotp_size (2)"), std::string::npos) << m;
    EXPECT_NE(m.find("tensor_parallel.size (4)"), std::string::npos) << m;
  }
  EXPECT_THROW(load(R"(, "tensor_parallel": {"autotp_size": -2})"), UsageError);
}

#ifdef XTRAIN_WITH_CUDA
TEST(EngineKeys, Tf32SetsTheCudaMatmulMode) {
  for (bool on : {true, false, true}) {
    step_output(load(c10::str(R"(, "tf32": {"enabled": )", on ? "true" : "false", "}")));
    EXPECT_EQ(at::globalContext().allowTF32CuBLAS(), on);
    EXPECT_EQ(at::globalContext().allowTF32CuDNN(), on);
  }
}
#endif

}  // namespace
}  // namespace xtrain::engine_keys_test
