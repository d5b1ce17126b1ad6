// `xtrain compress` and `xtrain export` as users call them: a briefly trained MLP run on
// Fashion-MNIST is channel-pruned, fine-tuned and quantised by the program, its compressed folder
// is exported to ONNX, and ONNX Runtime's output on validation images is compared with the
// compressed model loaded back in this process (fp32), and with its fp32 predictions (int8 QDQ).
// Exit codes: 2 for a misspelt compress key (with a suggestion) and for a missing run.
#include <gtest/gtest.h>

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <filesystem>
#include <fstream>

#include "export/ort_runner.h"
#include "support/fixtures.h"
#include "support/paths.h"
#include "xtrain/compress/artifact.h"
#include "xtrain/config/config.h"
#include "xtrain/data/dataset.h"
#include "xtrain/models/factory.h"

namespace xtrain::compress::cli_test {
namespace {
namespace fs = std::filesystem;

int xtrain(const std::string& args, std::string* out) {
  return testing::run_command(testing::xtrain_binary() + " " + args, out);
}

// One trained run shared by the tests of this file (about 2 s of training).
const std::string& trained_run() {
  static const std::string run = [] {
    const auto dir = testing::temp_dir("compress-cli");
    std::ofstream(dir + "/train.json") << R"({
      "train_batch_size": 64, "train_micro_batch_size_per_gpu": 64,
      "optimizer": {"type": "AdamW", "params": {"lr": 2e-3}},
      "xtrain": {"model": {"type": "mlp", "hidden": [64, 32]}, "data": {"type": "fashion_mnist"},
                 "steps": 60, "eval_interval": 0, "eval_batches": 2, "save_interval": 0}
    })";
    std::string out;
    const int rc = xtrain("train --config " + dir + "/train.json --output " + dir + "/run", &out);
    EXPECT_EQ(rc, 0) << out;
    return dir + "/run";
  }();
  return run;
}

// `n` validation images, the same for every test.
at::Tensor val_images(const config::Config& cfg, int64_t n) {
  auto splits = data::open_datasets(cfg.data, 0, data::default_cache_dir());
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = i * 37;
  return splits.val->collate(idx).input;
}

TEST(CompressCli, PruneQuantiseThenExportRunsInOnnxRuntime) {
  const auto why = testing::ort_unavailable();
  if (!why.empty()) GTEST_SKIP() << why;
  const auto run = trained_run();
  ASSERT_TRUE(fs::exists(run + "/config.json"));
  const auto dir = fs::path(run).parent_path().string();
  std::ofstream(dir + "/compress.json") << R"({
    "pruning": {"method": "l1", "config_list": [{"sparsity": 0.5, "op_types": ["Linear"]}],
                "finetune": {"steps": 20, "lr": 1e-4}},
    "quantization": {"mode": "static", "observer": "minmax", "calibration_batches": 4},
    "evaluation": {"batches": 4, "latency_repeats": 2}
  })";
  std::string out;
  ASSERT_EQ(xtrain("compress --run " + run + " --config " + dir + "/compress.json", &out), 0) << out;
  for (const char* f : {"model.pt", "config.json", "quant.json", "summary.md"})
    EXPECT_TRUE(fs::exists(run + "/compressed/" + f)) << f;
  EXPECT_NE(out.find("compressed model: "), std::string::npos) << out;

  // fp32: the pruned model as the folder holds it, loaded back here, against ONNX Runtime.
  ASSERT_EQ(xtrain("export --run " + run + " --onnx " + dir + "/fp32.onnx", &out), 0) << out;
  config::LoadOptions lo;
  lo.quiet = true;
  const auto cfg = config::load(run + "/compressed/config.json", lo).config;
  auto model = models::build_model(cfg.model);
  load_state(*model.module, run + "/compressed/model.pt");
  model.module->eval();
  at::NoGradGuard no_grad;
  const auto x = val_images(cfg, 64);
  const auto expected = model.forward(x);
  // Channel pruning at 50% really shrank the hidden layers (the exported graph is smaller too).
  int64_t params = 0;
  for (const auto& p : model.module->parameters()) params += p.numel();
  EXPECT_LT(params, 784 * 64 / 2 + 64 * 32 + 32 * 10 + 200) << "hidden layers were not halved";
  const auto fp32 = testing::run_onnx_runtime(dir + "/fp32.onnx", x, "input", "logits", dir);
  ASSERT_TRUE(fp32.output.defined());
  testing::expect_close(fp32.output, expected, 1e-5, 1e-5, "pruned MLP: ORT vs xtrain");

  // int8 QDQ with the folder's quantisation plan: predictions agree with fp32 on almost every image.
  ASSERT_EQ(xtrain("export --run " + run + " --onnx " + dir + "/int8.onnx --int8", &out), 0) << out;
  const auto int8 = testing::run_onnx_runtime(dir + "/int8.onnx", x, "input", "logits", dir);
  ASSERT_TRUE(int8.output.defined());
  const double agree = int8.output.argmax(1).eq(expected.argmax(1)).to(at::kDouble).mean().item<double>();
  EXPECT_GE(agree, 0.95) << "int8 ONNX predictions vs fp32";
}

TEST(CompressCli, DistilsIntoTheStudentTheConfigNames) {
  const auto run = trained_run();
  const auto dir = testing::temp_dir("compress-cli-distill");
  std::ofstream(dir + "/distill.json") << R"({
    "distillation": {"student": {"hidden": [16]}, "temperature": 4.0, "alpha": 0.7, "train": {"steps": 20, "lr": 2e-3}},
    "evaluation": {"batches": 2, "latency_repeats": 1}
  })";
  std::string out;
  ASSERT_EQ(xtrain("compress --run " + run + " --config " + dir + "/distill.json --output " + dir + "/student", &out), 0)
      << out;
  config::LoadOptions lo;
  lo.quiet = true;
  const auto cfg = config::load(dir + "/student/config.json", lo).config;
  EXPECT_EQ(cfg.model.hidden, std::vector<int64_t>{16});
  auto student = models::build_model(cfg.model);
  load_state(*student.module, dir + "/student/model.pt");  // throws on a shape mismatch
  EXPECT_FALSE(fs::exists(dir + "/student/quant.json"));
}

TEST(CompressCli, ExitCodes) {
  const auto dir = testing::temp_dir("compress-cli-codes");
  std::ofstream(dir + "/bad.json") << R"({"quantization": {"mode": "static", "obsrever": "minmax"}})";
  std::string out;
  EXPECT_EQ(xtrain("compress --run " + trained_run() + " --config " + dir + "/bad.json", &out), 2) << out;
  EXPECT_NE(out.find("did you mean 'observer'"), std::string::npos) << out;
  EXPECT_EQ(xtrain("export --run " + dir + "/no-such-run --onnx " + dir + "/x.onnx", &out), 2) << out;
  EXPECT_EQ(out.find("Exception raised from"), std::string::npos) << out;
}

}  // namespace
}  // namespace xtrain::compress::cli_test
