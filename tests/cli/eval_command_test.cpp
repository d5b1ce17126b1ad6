// `xtrain eval` and `xtrain generate` as users run them, on a tiny trained run: the default fixed
// sample of batches, --batches, --full over the whole validation split, the standard error
// checked with NumPy on the same per-batch losses, the progress and summary lines (plain and on
// a terminal), and generated text that is valid UTF-8 unless --raw asks for the bytes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "support/paths.h"
#include "xtrain/base/utf8.h"
#include "xtrain/data/dataset.h"
#include "xtrain/run/evaluate.h"
#include "xtrain/run/train.h"

namespace xtrain::eval_command_test {
namespace {

constexpr int64_t kMicro = 4;

// One tiny run for every test here: 1 layer, d_model 32, 16-byte windows, batches of 4.
const std::string& run_dir() {
  static const std::string dir = [] {
    const std::string root = testing::temp_dir("eval-cli");
    TrainRequest r;
    r.output = root + "/run";
    r.overrides = {"xtrain.data.path=" + testing::write_corpus(root, 400, 17), "xtrain.model.layers=1",
                   "xtrain.model.d_model=32", "xtrain.model.heads=2", "xtrain.model.seq_len=16",
                   "train_micro_batch_size_per_gpu=" + std::to_string(kMicro), "xtrain.steps=3",
                   "xtrain.eval_interval=0", "xtrain.eval_batches=2", "xtrain.generate.tokens=0"};
    train(r);
    return r.output;
  }();
  return dir;
}

int xtrain(const std::string& args, std::string* out) {
  return testing::run_command(testing::xtrain_binary() + " " + args, out);
}

// stdout only (run_command adds stderr to the output).
int xtrain_stdout(const std::string& args, std::string* out) {
  return testing::run_command("(" + testing::xtrain_binary() + " " + args + " 2>/dev/null)", out);
}

nlohmann::json eval_json(const std::string& args) {
  std::string out;
  EXPECT_EQ(xtrain_stdout("eval --run " + run_dir() + " --json " + args, &out), 0) << out;
  return nlohmann::json::parse(out);
}

// The standard error of the mean, computed by NumPy from the same per-batch losses.
double numpy_standard_error(const std::vector<double>& losses) {
  const std::string file = testing::temp_dir("eval-numpy") + "/losses.json";
  std::ofstream(file) << nlohmann::json(losses).dump();
  std::string out;
  EXPECT_EQ(testing::run_command("/usr/bin/python3 -c 'import json, numpy as np; x = np.array(json.load(open(\"" +
                                     file + "\"))); print(repr(float(x.std(ddof=1) / np.sqrt(len(x)))))'",
                                 &out),
            0)
      << out;
  return std::stod(out);
}

TEST(EvalStatistics, ClosedForm) {
  // {1, 2, 3, 4}: mean 2.5, sample variance 5/3, standard error sqrt(5/3 / 4).
  const auto r = mean_and_standard_error({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(r.mean, 2.5);
  EXPECT_NEAR(r.standard_error, std::sqrt(5.0 / 12.0), 1e-15);
  EXPECT_TRUE(std::isnan(mean_and_standard_error({7}).standard_error));
  EXPECT_DOUBLE_EQ(mean_and_standard_error({7}).mean, 7);
  EXPECT_DOUBLE_EQ(mean_and_standard_error({3, 3, 3}).standard_error, 0.0);
}

TEST(EvalCommand, BatchesHonouredWithNumpyStandardError) {
  const auto j = eval_json("--batches 7");
  ASSERT_EQ(j["batches"], 7);
  ASSERT_EQ(j["batch_losses"].size(), 7u);
  EXPECT_EQ(j["samples"], 7 * kMicro);
  EXPECT_EQ(j["full"], false);
  const auto losses = j["batch_losses"].get<std::vector<double>>();
  double mean = 0;
  for (double l : losses) mean += l / 7.0;
  EXPECT_NEAR(j["loss"].get<double>(), mean, 1e-12);  // equal batches: the mean of the batch means
  // The JSON carries 17 significant digits: the two computations agree to rounding.
  EXPECT_NEAR(j["loss_standard_error"].get<double>(), numpy_standard_error(losses), 1e-12);
  EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(mean), 1e-9);
  const auto d = eval_json("");  // the default: 100 batches, the first 7 of them the same ones
  EXPECT_EQ(d["batches"], 100);
  for (int i = 0; i < 7; ++i) EXPECT_DOUBLE_EQ(d["batch_losses"][i].get<double>(), losses[i]) << i;
}

TEST(EvalCommand, ConfigThatDescribesAnotherModelIsAnErrorNamingTheTensor) {
  // The same run with config.json edited to a wider model: the checkpoint's [.., 32] tensors do not
  // fit the [.., 64] model. A usage error naming the tensor and both shapes (it was ATen's reshape
  // error; a same-sized tensor of another shape was reinterpreted without a word).
  namespace fs = std::filesystem;
  const std::string copy = testing::temp_dir("eval-cli-wrong-config") + "/run";
  fs::copy(run_dir(), copy, fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(copy + "/config.json"));
  config["xtrain"]["model"]["d_model"] = 64;
  std::ofstream(copy + "/config.json") << config.dump();
  std::string out;
  EXPECT_EQ(xtrain("eval --run " + copy + " --json", &out), 2) << out;
  EXPECT_NE(out.find(", and the model built from " + copy + "/config.json needs [256, 64]"), std::string::npos) << out;
  EXPECT_NE(out.find("holds wte.weight [256, 32]"), std::string::npos) << out;
}

TEST(EvalCommand, FullCoversTheSplit) {
  const auto j = eval_json("--full");
  // The split's size from the data layer, not from eval's own output.
  const auto run = load_trained_run(run_dir());
  const int64_t split = data::open_datasets(run.config.data, 16, data::default_cache_dir()).val->size();
  ASSERT_GT(split, 100 * kMicro) << "the tiny split should be larger than the default sample";
  EXPECT_EQ(j["split_samples"], split);
  EXPECT_EQ(j["samples"], split);
  const int64_t batches = (split + kMicro - 1) / kMicro;
  ASSERT_EQ(j["batches"], batches);
  const auto losses = j["batch_losses"].get<std::vector<double>>();
  double sum = 0;  // the last batch is partial: it counts by its size
  for (int64_t i = 0; i < batches; ++i) sum += losses[i] * static_cast<double>(std::min(kMicro, split - i * kMicro));
  EXPECT_NEAR(j["loss"].get<double>(), sum / static_cast<double>(split), 1e-12);
  EXPECT_NEAR(j["loss_standard_error"].get<double>(), numpy_standard_error(losses), 1e-12);
}

TEST(EvalCommand, ShowsProgressAndSummary) {
  std::string out;
  ASSERT_EQ(xtrain("eval --run " + run_dir() + " --batches 20", &out), 0) << out;
  for (const char* want : {"eval: ", "20 of ", "eval 2/20 | loss ", "eval 10/20 | loss ", " ± ", " tok/s | ETA ",
                           "eval 20/20 | ", "| took ", "val loss: ", "(standard error of the mean over 20 batches: std/sqrt(n))",
                           "val perplexity: ", "samples: 80 of ", "--full scores all of them"}) {
    EXPECT_NE(out.find(want), std::string::npos) << "missing '" << want << "' in:\n" << out;
  }
  EXPECT_EQ(out.find('\r'), std::string::npos) << "not a terminal: plain lines";
  // On a terminal (a pseudo-terminal from script(1)) the line is rewritten in place.
  ASSERT_EQ(testing::run_command("script -qec '" + testing::xtrain_binary() + " eval --run " + run_dir() +
                                     " --batches 20' /dev/null",
                                 &out),
            0)
      << out;
  EXPECT_NE(out.find("\r\033[Keval 1/20 | "), std::string::npos) << out;
  EXPECT_NE(out.find("eval 20/20 | "), std::string::npos) << out;
}

TEST(EvalCommand, BadBatchFlags) {
  std::string out;
  EXPECT_EQ(xtrain("eval --run " + run_dir() + " --batches 0", &out), 2);
  EXPECT_NE(out.find("--full"), std::string::npos) << out;
  EXPECT_EQ(xtrain("eval --run " + run_dir() + " --batches 3 --full", &out), 2);
  EXPECT_NE(out.find("excludes"), std::string::npos) << out;
}

// Python's strict UTF-8 decoder is the judge of validity.
bool is_valid_utf8(const std::string& text) {
  const std::string file = testing::temp_dir("utf8") + "/text";
  std::ofstream(file, std::ios::binary) << text;
  return testing::run_command("/usr/bin/python3 -c 'open(\"" + file + "\", \"rb\").read().decode(\"utf-8\")'") == 0;
}

TEST(GenerateCommand, EscapesBytesThatAreNotUtf8) {
  // An almost untrained byte model at a high temperature samples from all 256 bytes.
  const std::string args = "generate --run " + run_dir() + " --tokens 400 --temperature 5 --top-k 0 --seed 3";
  std::string shown, raw;
  ASSERT_EQ(xtrain_stdout(args, &shown), 0) << shown;
  ASSERT_EQ(xtrain_stdout(args + " --raw", &raw), 0) << raw;
  ASSERT_FALSE(is_valid_utf8(raw)) << "the raw sample should hold invalid bytes for this test to mean anything";
  EXPECT_TRUE(is_valid_utf8(shown));
  EXPECT_EQ(shown, printable_text(raw.substr(0, raw.size() - 1)) + "\n");
  EXPECT_NE(shown.find("\\x"), std::string::npos);
}

TEST(TrainCommand, ClosingSampleIsValidUtf8) {
  const std::string dir = testing::temp_dir("sample-utf8");
  const std::string corpus = testing::write_corpus(dir, 400, 17);
  std::string out;
  ASSERT_EQ(xtrain("train --output " + dir + "/run --set xtrain.data.path=" + corpus +
                       " --set xtrain.model.layers=1 --set xtrain.model.d_model=32 --set xtrain.model.heads=2"
                       " --set xtrain.model.seq_len=16 --set train_micro_batch_size_per_gpu=4 --set xtrain.steps=1"
                       " --set xtrain.eval_batches=1 --set xtrain.generate.tokens=400"
                       " --set xtrain.generate.temperature=5 --set xtrain.generate.top_k=0",
                   &out),
            0)
      << out;
  const auto at = out.find("sample:\n");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_TRUE(is_valid_utf8(out));
  EXPECT_NE(out.find("\\x", at), std::string::npos) << "an untrained byte model at temperature 5 samples invalid bytes";
}

}  // namespace
}  // namespace xtrain::eval_command_test
