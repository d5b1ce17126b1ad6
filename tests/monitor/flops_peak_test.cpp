// The MFU peak: the per-machine cache (written once, reused without measuring, keyed by what
// changes a peak), the robust measurement, and RunMonitor's MFU: closed form, never above 1 (a
// measured peak is raised to a higher training rate and stored; a user's peak is kept and MFU
// shown as 1).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/paths.h"
#include "xtrain/monitor/flops.h"
#include "xtrain/monitor/run_monitor.h"

namespace xtrain::monitor::flops_peak_test {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

std::string cpuinfo_model() {  // read here, not through the code under test
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "";
}

struct ThreadsGuard {  // restores ATen's thread count
  int saved = at::get_num_threads();
  ~ThreadsGuard() { at::set_num_threads(saved); }
};

TEST(PeakCache, WrittenOnceThenReusedWithoutMeasuring) {
  const std::string path = testing::temp_dir("peak") + "/sub/peak_flops.json";  // folder created on store
  const PeakCache cache(path);
  int measured = 0;
  auto measure = [&] {
    ++measured;
    return GemmPeak{123e9, "2048x256x768"};
  };
  const PeakKey key = peak_key(c10::Device(c10::kCPU), at::kFloat, "test gemm");
  const ResolvedPeak first = resolve_peak(key, cache, measure);
  EXPECT_TRUE(first.measured);
  EXPECT_EQ(first.flops, 123e9);
  const ResolvedPeak second = resolve_peak(key, cache, measure);
  EXPECT_FALSE(second.measured);
  EXPECT_EQ(second.flops, 123e9);
  EXPECT_EQ(measured, 1) << "the second resolve must read the cache, not measure";

  const auto j = read_json(path);
  ASSERT_EQ(j["version"], 1);
  ASSERT_EQ(j["entries"].size(), 1u);
  const auto& e = j["entries"][key.str()];
  EXPECT_EQ(e["flops"].get<double>(), 123e9);
  EXPECT_EQ(e["source"], "gemm");
  EXPECT_EQ(e["detail"], "2048x256x768");
  EXPECT_EQ(e["key"]["cpu"], cpuinfo_model());
  EXPECT_EQ(e["key"]["cores"].get<long>(), sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_EQ(e["key"]["threads"].get<int>(), at::get_num_threads());
  EXPECT_EQ(e["key"]["dtype"], "fp32");
  EXPECT_EQ(e["key"]["gemm"], "test gemm");
  const std::string versions = e["key"]["versions"];
  EXPECT_EQ(versions.rfind("torch ", 0), 0u) << versions;
  EXPECT_NE(versions.find("; "), std::string::npos) << "LibTorch, oneDNN and BLAS: " << versions;
}

TEST(PeakCache, EveryKeyFieldSeparatesEntries) {
  ThreadsGuard restore;
  const PeakCache cache(testing::temp_dir("peak") + "/peak_flops.json");
  int measured = 0;
  auto measure = [&] {
    ++measured;
    return GemmPeak{1e9 * (measured + 1), "n"};
  };
  const c10::Device cpu(c10::kCPU);
  at::set_num_threads(1);
  const PeakKey one = peak_key(cpu, at::kFloat, "g");
  resolve_peak(one, cache, measure);
  at::set_num_threads(2);
  const PeakKey two = peak_key(cpu, at::kFloat, "g");
  EXPECT_NE(one.str(), two.str());
  EXPECT_TRUE(resolve_peak(two, cache, measure).measured) << "another thread count is another peak";
  EXPECT_TRUE(resolve_peak(peak_key(cpu, at::kBFloat16, "g"), cache, measure).measured) << "dtype";
  EXPECT_TRUE(resolve_peak(peak_key(cpu, at::kFloat, "h"), cache, measure).measured) << "GEMM";
  PeakKey other_cpu = two;
  other_cpu.cpu += " (another)";
  EXPECT_TRUE(resolve_peak(other_cpu, cache, measure).measured) << "CPU model";
  PeakKey other_lib = two;
  other_lib.versions += " (another BLAS)";
  EXPECT_TRUE(resolve_peak(other_lib, cache, measure).measured) << "library versions";
  EXPECT_EQ(measured, 6);
  EXPECT_EQ(cache.find(one), 2e9);  // each key kept its own value
  EXPECT_EQ(cache.find(two), 3e9);
}

TEST(PeakCache, KeepsTheBestAndSurvivesAGarbledFile) {
  const std::string path = testing::temp_dir("peak") + "/peak_flops.json";
  const PeakCache cache(path);
  const PeakKey key = peak_key(c10::Device(c10::kCPU), at::kFloat, "g");
  cache.store(key, 100e9, "gemm", "a");
  cache.store(key, 50e9, "gemm", "b");  // slower (another rank measuring at the same time): kept out
  EXPECT_EQ(cache.find(key), 100e9);
  cache.store(key, 200e9, "training", "c");
  EXPECT_EQ(cache.find(key), 200e9);
  EXPECT_EQ(read_json(path)["entries"][key.str()]["source"], "training");
  std::ofstream(path) << "{ not json";
  EXPECT_EQ(cache.find(key), 0.0);
  cache.store(key, 7e9, "gemm", "d");
  EXPECT_EQ(read_json(path)["entries"][key.str()]["flops"].get<double>(), 7e9);
  EXPECT_EQ(PeakCache("").find(key), 0.0);  // no cache: always absent, store does nothing
  PeakCache("").store(key, 1, "gemm", "");
}

TEST(PeakCache, MeasurementIsTheBestShape) {
  // A GEMM that does no work "runs" at a rate set by the timer: the best of the shapes must be one
  // of the listed ones and positive; a real GEMM must be checked by the benchmark, not here.
  int calls = 0;
  const GemmFn none = [&](const at::Tensor&, const at::Tensor&, const at::Tensor&) { ++calls; };
  const GemmPeak p = measure_gemm_peak(c10::Device(c10::kCPU), at::kFloat, none);
  EXPECT_GT(p.flops, 0.0);
  EXPECT_GT(calls, 8 * 6) << "each shape: a warm-up and 5 timed batches";
  EXPECT_NE(p.shape.find('x'), std::string::npos) << p.shape;
}

TEST(PeakCache, ACheckFasterThanTheCacheMeasuresAgain) {
  // A peak cached from a busy machine is too low for ever unless something notices: the check of
  // its best shape at start does.
  const PeakCache cache(testing::temp_dir("peak") + "/peak_flops.json");
  const PeakKey key = peak_key(c10::Device(c10::kCPU), at::kFloat, "g");
  cache.store(key, 100e9, "gemm", "busy", "512x512x512");
  int measured = 0;
  std::string probed;
  double now = 104e9;  // within 5%: noise, the cache stands
  auto measure = [&] {
    ++measured;
    return GemmPeak{180e9, "1024x1024x1024"};
  };
  auto probe = [&](const std::string& shape) {
    probed = shape;
    return now;
  };
  ResolvedPeak r = resolve_peak(key, cache, measure, probe);
  EXPECT_FALSE(r.measured);
  EXPECT_EQ(r.flops, 100e9);
  EXPECT_EQ(probed, "512x512x512") << "the check times the cached best shape";
  now = 150e9;  // 50% above: measured again, the best of both stored
  r = resolve_peak(key, cache, measure, probe);
  EXPECT_TRUE(r.measured);
  EXPECT_EQ(measured, 1);
  EXPECT_EQ(r.flops, 180e9);
  EXPECT_EQ(cache.entry(key).flops, 180e9);
  EXPECT_EQ(cache.entry(key).shape, "1024x1024x1024");
  now = 250e9;  // a check above the new measurement counts too
  EXPECT_EQ(resolve_peak(key, cache, measure, probe).flops, 250e9);
}

TEST(PeakCache, CheckTimesTheNamedShape) {
  std::vector<std::vector<int64_t>> seen;  // [M, K, N] of each call
  const GemmFn record = [&](const at::Tensor& c, const at::Tensor& a, const at::Tensor&) {
    seen.push_back({a.size(0), a.size(1), c.size(1)});
  };
  EXPECT_GT(measure_gemm_shape(c10::Device(c10::kCPU), at::kFloat, record, "64x32x16", 1), 0.0);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), (std::vector<int64_t>{64, 32, 16}));
  measure_gemm_shape(c10::Device(c10::kCPU), at::kFloat, record, "garbage", 1);
  EXPECT_EQ(seen.back(), (std::vector<int64_t>{1024, 1024, 1024}));
}

TEST(PeakCache, DefaultPathFollowsTheEnvironment) {
  const char* saved = std::getenv("XTRAIN_CACHE_DIR");
  const std::string before = saved ? saved : "";
  setenv("XTRAIN_CACHE_DIR", "/tmp/xc", 1);
  EXPECT_EQ(default_peak_cache_path(), "/tmp/xc/peak_flops.json");
  if (saved) setenv("XTRAIN_CACHE_DIR", before.c_str(), 1); else unsetenv("XTRAIN_CACHE_DIR");
  if (!saved && std::getenv("XDG_CACHE_HOME") == nullptr && std::getenv("HOME") != nullptr) {
    EXPECT_EQ(default_peak_cache_path(), std::string(std::getenv("HOME")) + "/.cache/xtrain/peak_flops.json");
  }
}

// A RunMonitor with its own cache file, whose peak GEMM does no work but takes the time of one at
// 1 TFLOP/s (sleeps; a little slower with the sleep's overhead), and counts its calls.
struct Monitored {
  std::string dir = testing::temp_dir("mfu");
  int gemm_calls = 0;
  RunMonitorOptions options() {
    RunMonitorOptions o;
    o.train_flops_per_unit = 1e6;
    o.peak_gemm = [this](const at::Tensor& c, const at::Tensor& a, const at::Tensor&) {
      ++gemm_calls;
      const double flops = 2.0 * double(a.size(0)) * double(a.size(1)) * double(c.size(1));
      std::this_thread::sleep_for(std::chrono::duration<double>(flops / 1e12));
    };
    o.peak_gemm_name = "counting gemm";
    o.peak_cache = dir + "/peak_flops.json";
    return o;
  }
  PeakKey key() const { return peak_key(c10::Device(c10::kCPU), at::kFloat, "counting gemm"); }
};

TEST(RunMonitorPeak, MeasuredOnceThenCached) {
  Monitored m;
  {
    RunMonitor mon(m.options(), m.dir + "/a", "{}", 0);
    EXPECT_EQ(mon.peak_source(), "measured");
    EXPECT_GT(m.gemm_calls, 0);
    EXPECT_EQ(PeakCache(m.options().peak_cache).find(m.key()), mon.peak_flops());
  }
  const int calls = m.gemm_calls;
  EXPECT_GT(calls, 8 * 6) << "8 shapes, each a warm-up and 5 batches";
  RunMonitor again(m.options(), m.dir + "/b", "{}", 0);
  EXPECT_EQ(again.peak_source(), "cached");
  // Only the check: its best shape, a warm-up and 3 batches of >= 20 ms (2048^3 at 1 TFLOP/s: 17 ms).
  EXPECT_LT(m.gemm_calls - calls, 40) << "no second measurement";
}

TEST(RunMonitorPeak, MfuClosedFormAndRaisedPeak) {
  Monitored m;
  // The fake GEMM's own rate (<= 1 TFLOP/s) does not beat the seeded peak: the check keeps it.
  PeakCache(m.options().peak_cache).store(m.key(), 1e12, "gemm", "seeded", "512x512x512");
  RunMonitorOptions o = m.options();
  o.devices = 2;
  RunMonitor mon(o, m.dir + "/run", "{}", 0);
  ASSERT_EQ(mon.peak_source(), "cached");
  ASSERT_EQ(mon.peak_flops(), 1e12);
  // 1e6 units/s x 1e6 FLOPs = 1e12 FLOP/s over 2 devices of 1e12: 50%.
  EXPECT_DOUBLE_EQ(mon.mfu(1e6), 0.5);
  // 1e7 units/s: 5e12 FLOP/s per device, 5x the peak: shown as 100%, the peak raised and stored.
  EXPECT_DOUBLE_EQ(mon.mfu(1e7), 1.0);
  EXPECT_DOUBLE_EQ(mon.peak_flops(), 5e12);
  EXPECT_DOUBLE_EQ(PeakCache(o.peak_cache).find(m.key()), 5e12);
  EXPECT_EQ(read_json(o.peak_cache)["entries"][m.key().str()]["source"], "training");
  EXPECT_EQ(PeakCache(o.peak_cache).entry(m.key()).shape, "512x512x512") << "a raise keeps the GEMM shape";
  EXPECT_DOUBLE_EQ(mon.mfu(2e6), 0.2);  // against the raised peak: 2e12 / (2 x 5e12)
}

TEST(RunMonitorPeak, UserPeakIsKeptAndMfuCapped) {
  Monitored m;
  RunMonitorOptions o = m.options();
  o.monitor.peak_tflops = 1e-3;  // 1 GFLOP/s
  RunMonitor mon(o, m.dir + "/run", "{}", 0);
  EXPECT_EQ(mon.peak_source(), "xtrain.monitor.peak_tflops");
  EXPECT_DOUBLE_EQ(mon.mfu(100), 0.1);  // 1e8 / 1e9
  EXPECT_DOUBLE_EQ(mon.mfu(1e4), 1.0);  // 10x the user's peak: capped, with a warning
  EXPECT_DOUBLE_EQ(mon.peak_flops(), 1e9);
  EXPECT_EQ(m.gemm_calls, 0);
  EXPECT_FALSE(std::filesystem::exists(o.peak_cache)) << "a user's peak is not measured or stored";
}

}  // namespace
}  // namespace xtrain::monitor::flops_peak_test
