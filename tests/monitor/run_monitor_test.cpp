// RunMonitor: the metrics a training loop gets from it (names, MFU arithmetic, memory, stage
// times), where they land (metrics.jsonl, CSV, TensorBoard — read back by check_tfevents.py),
// the profile step learning FLOPs per token, and option validation.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/nn/modules/linear.h>
#include <ATen/ops/randn.h>

#include <filesystem>
#include <fstream>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/monitor/run_monitor.h"

namespace xtrain::monitor::run_monitor_test {
namespace {
namespace fs = std::filesystem;

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::string events_file(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) return e.path().string();
  }
  return "";
}

TEST(RunMonitor, StepMetricsEverywhere) {
  const std::string run = testing::temp_dir("runmon") + "/run";
  RunMonitorOptions o;
  o.tensorboard.enabled = o.csv_monitor.enabled = true;
  o.wall_clock_breakdown = true;
  o.train_flops_per_unit = 1e6;
  // 1 EFLOP/s: a step of two empty scopes (microseconds, so ~1e8 tokens/s at 1 MFLOP/token)
  // stays far below it; MFU is capped at 1 (flops_peak_test.cpp), which would hide the arithmetic.
  o.monitor.peak_tflops = 1e6;
  o.monitor.histogram_interval = 2;
  {
    RunMonitor mon(o, run, "{\"steps\": 2}", 0);
    EXPECT_DOUBLE_EQ(mon.peak_flops(), 1e18);
    for (int64_t step = 1; step <= 2; ++step) {
      mon.begin_step();
      { auto t = mon.timer().scope("forward"); }
      StepReport r;
      r.step = step;
      r.loss = 2.0;
      r.lr = 1e-3;
      r.units = 100;
      r.samples = 8 * step;
      r.memory_bytes = {{"params", 1 << 20}};
      mon.end_step(r, /*log=*/true);
      if (mon.histograms_due(step)) mon.write_histograms(step, "params/", {{"w", at::randn({64})}});
    }
    mon.write_eval(2, 1.5, -1);
    const std::string summary = mon.summary();
    EXPECT_NE(summary.find("forward"), std::string::npos) << summary;
    EXPECT_NE(summary.find("MFU: "), std::string::npos) << summary;
  }
  const auto lines = read_jsonl(run + "/metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);  // two steps, one eval; the config goes to TensorBoard only
  const auto& m = lines[1];
  EXPECT_EQ(m["step"], 2);
  // 100 tokens over the step's own time; MFU from that rate at 1 MFLOP/token on a 1 EFLOP/s peak.
  const double rate = m["train/tokens_per_s"].get<double>();
  EXPECT_GT(rate, 100.0);  // a step of two empty scopes takes far less than a second
  EXPECT_DOUBLE_EQ(m["train/mfu"].get<double>(), 1e6 * rate / 1e18);
  EXPECT_DOUBLE_EQ(m["train/ppl"].get<double>(), std::exp(2.0));
  EXPECT_DOUBLE_EQ(m["memory/params_mb"].get<double>(), 1.0);
  EXPECT_GT(m["memory/rss_mb"].get<double>(), 0.0);
  for (const char* key : {"train/loss", "train/lr", "train/grad_norm", "train/skipped_steps", "train/samples",
                          "time/forward_ms", "time/step_ms", "time/other_ms"}) {
    EXPECT_TRUE(m.contains(key)) << key;
  }
  EXPECT_FALSE(m.contains("train/loss_scale"));  // 0: no loss scaling
  EXPECT_DOUBLE_EQ(lines[2]["val/ppl"].get<double>(), std::exp(1.5));
  EXPECT_TRUE(fs::exists(run + "/csv/train_mfu.csv"));
  std::string out;
  ASSERT_EQ(testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/tests/monitor/check_tfevents.py " +
                                     events_file(run), &out), 0) << out;
  const auto events = nlohmann::json::parse(out)["events"];
  EXPECT_EQ(events[1]["values"][0]["tag"], "config");
  EXPECT_EQ(events[1]["values"][0]["tensor"]["string_val"][0], "    {\"steps\": 2}");
  bool histogram = false;
  for (const auto& e : events) {
    if (e.contains("values") && e["values"][0]["tag"] == "params/w") histogram = e["values"][0].contains("histo");
  }
  EXPECT_TRUE(histogram);
}

TEST(RunMonitor, ProfileStepLearnsFlopsPerUnit) {
  const std::string dir = testing::temp_dir("runmon");
  RunMonitorOptions o;
  o.unit = "samples";
  o.flops_profiler.enabled = true;
  o.flops_profiler.profile_step = 2;
  o.flops_profiler.output_file = dir + "/profile.txt";
  o.monitor.peak_tflops = 1.0;
  RunMonitor mon(o, dir + "/run", "{}", 0);
  EXPECT_TRUE(mon.timer().enabled());  // flops_profiler turns on the breakdown, as in DeepSpeed
  EXPECT_FALSE(mon.profile_due(1));
  ASSERT_TRUE(mon.profile_due(2));
  torch::nn::Linear linear(8, 16);
  mon.start_profile(*linear);
  linear->forward(at::randn({4, 8}));
  const std::string table = mon.finish_profile(2, /*units=*/4);
  EXPECT_FALSE(mon.profile_due(2));  // once
  EXPECT_NE(table.find("Linear"), std::string::npos);
  std::ifstream f(dir + "/profile.txt");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(f), {}), table);
  // forward 2·8·16 FLOPs per sample, training 3x: 768 FLOPs per sample; at 1e9 samples/s on a
  // 1 TFLOP/s peak that is 76.8%.
  EXPECT_DOUBLE_EQ(mon.mfu(1e9), 0.768);
}

TEST(RunMonitor, BadOptionsNameTheKey) {
  RunMonitorOptions o;
  o.monitor.flush_secs = 0;
  try {
    RunMonitor mon(o, testing::temp_dir("runmon"), "{}", 0);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("xtrain.monitor.flush_secs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xtrain::monitor::run_monitor_test
