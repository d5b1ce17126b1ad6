// TensorBoard event files checked by an independent reader (tests/monitor/check_tfevents.py:
// python3-crc32c for the framing, protoc-generated code from tfevents.proto for the payloads):
// every logged value comes back, truncated and corrupted files are reported, and the background
// flusher makes records visible without closing the file.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "support/paths.h"
#include "xtrain/monitor/histogram.h"
#include "xtrain/monitor/tensorboard_sink.h"

namespace xtrain::monitor::tensorboard_test {
namespace {
namespace fs = std::filesystem;

struct Checked {
  int rc = -1;
  nlohmann::json json;
};

Checked check(const std::string& path) {
  std::string out;
  Checked c;
  c.rc = testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/tests/monitor/check_tfevents.py " + path,
                              &out);
  try {
    c.json = nlohmann::json::parse(out);
  } catch (const std::exception&) {
    ADD_FAILURE() << "checker output is not JSON: " << out;
  }
  return c;
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

const std::vector<double> kSample = {-1.5, -0.2, 0.0, 0.0, 0.3, 2.0, 2.0, 1e-13, 50.0, NAN};

std::string write_run(const std::string& dir) {
  TensorBoardSink sink(dir);
  for (int64_t step = 1; step <= 5; ++step) {
    sink.write(step, {{"train/loss", 3.0 / step}, {"train/lr", 1e-3 * step}});
  }
  sink.write_histogram(5, "weights/w", make_histogram(kSample.data(), kSample.size()));
  sink.write_text(0, "config", "{\n  \"steps\": 5\n}");
  return sink.path();
}

TEST(TensorBoard, EveryValueDecodesAsLogged) {
  const std::string path = write_run(testing::temp_dir("tb"));
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  EXPECT_TRUE(std::regex_match(fs::path(path).filename().string(),
                               std::regex("events\\.out\\.tfevents\\.[0-9]{10}\\." + std::string(host))))
      << path;
  const auto c = check(path);
  ASSERT_EQ(c.rc, 0) << c.json.dump();
  const auto& ev = c.json["events"];
  ASSERT_EQ(ev.size(), 1u + 10 + 1 + 1);
  EXPECT_EQ(ev[0]["file_version"], "brain.Event:2");
  EXPECT_NEAR(ev[0]["wall_time"].get<double>(), std::time(nullptr), 60.0);  // a unix time, not a step
  for (int64_t step = 1; step <= 5; ++step) {
    const auto& loss = ev[1 + 2 * (step - 1)];  // one event per scalar, in std::map order: loss, lr
    EXPECT_EQ(loss["step"], step);
    EXPECT_EQ(loss["values"][0]["tag"], "train/loss");
    EXPECT_EQ(loss["values"][0]["simple_value"].get<double>(), static_cast<double>(static_cast<float>(3.0 / step)));
    const auto& lr_ev = ev[2 + 2 * (step - 1)];
    EXPECT_EQ(lr_ev["step"], step);
    EXPECT_EQ(lr_ev["values"][0]["tag"], "train/lr");
    EXPECT_EQ(lr_ev["values"][0]["simple_value"].get<double>(), static_cast<double>(static_cast<float>(1e-3 * step)));
  }
  const auto& text = ev[12]["values"][0];
  EXPECT_EQ(text["tag"], "config");
  EXPECT_EQ(text["plugin_name"], "text");
  EXPECT_EQ(text["tensor"]["dtype"], 7);  // DT_STRING
  EXPECT_EQ(text["tensor"]["dims"].size(), 0u);
  EXPECT_EQ(text["tensor"]["string_val"][0], "    {\n      \"steps\": 5\n    }");  // a markdown code block
}

TEST(TensorBoard, HistogramMatchesTheValues) {
  const auto c = check(write_run(testing::temp_dir("tb")));
  ASSERT_EQ(c.rc, 0) << c.json.dump();
  const auto& v = c.json["events"][11]["values"][0];
  EXPECT_EQ(v["tag"], "weights/w");
  const auto& h = v["histo"];
  std::vector<double> finite;
  for (double x : kSample) if (std::isfinite(x)) finite.push_back(x);
  double sum = 0, sq = 0;
  for (double x : finite) sum += x, sq += x * x;
  EXPECT_EQ(h["min"].get<double>(), -1.5);
  EXPECT_EQ(h["max"].get<double>(), 50.0);
  EXPECT_EQ(h["num"].get<double>(), finite.size());
  EXPECT_DOUBLE_EQ(h["sum"].get<double>(), sum);
  EXPECT_DOUBLE_EQ(h["sum_squares"].get<double>(), sq);
  const auto limits = h["bucket_limit"].get<std::vector<double>>();
  const auto counts = h["bucket"].get<std::vector<double>>();
  ASSERT_EQ(limits.size(), counts.size());
  // Bucket i holds [limits[i-1], limits[i]); recount by brute force over the values.
  double total = 0;
  for (size_t i = 0; i < limits.size(); ++i) {
    const double lo = i == 0 ? -INFINITY : limits[i - 1];
    double n = 0;
    for (double x : finite) n += (x >= lo && x < limits[i]) ? 1 : 0;
    EXPECT_EQ(counts[i], n) << "bucket " << i << " [" << lo << ", " << limits[i] << ")";
    if (i > 0) {
      EXPECT_GT(limits[i], limits[i - 1]);
    }
    total += counts[i];
  }
  EXPECT_EQ(total, finite.size());
  // Empty runs collapsed: never two empty buckets in a row; both zeros share the bucket ending at 1e-12.
  for (size_t i = 1; i < counts.size(); ++i) {
    EXPECT_FALSE(counts[i] == 0 && counts[i - 1] == 0) << i;
  }
  // TensorFlow's edges: 1.1^k steps from 1e-12.
  EXPECT_NEAR(default_bucket_limits()[default_bucket_limits().size() / 2 + 1], 1e-12, 1e-24);
  EXPECT_EQ(default_bucket_limits()[default_bucket_limits().size() / 2], 0.0);
}

TEST(TensorBoard, TruncatedAndCorruptedFilesAreReported) {
  const std::string dir = testing::temp_dir("tb");
  const std::string good = read_all(write_run(dir));
  write_all(dir + "/cut", good.substr(0, good.size() - 3));
  const auto cut = check(dir + "/cut");
  EXPECT_EQ(cut.rc, 1);
  EXPECT_EQ(cut.json["ok"], false);
  EXPECT_NE(cut.json["error"].get<std::string>().find("truncated"), std::string::npos) << cut.json.dump();
  EXPECT_EQ(cut.json["valid_records"], 12);
  std::string bad = good;
  bad[good.size() / 2] ^= 0x10;  // one bit in the middle of some record
  write_all(dir + "/bad", bad);
  const auto corrupt = check(dir + "/bad");
  EXPECT_EQ(corrupt.rc, 1);
  EXPECT_NE(corrupt.json["error"].get<std::string>().find("crc mismatch"), std::string::npos) << corrupt.json.dump();
  write_all(dir + "/header", good.substr(0, 6));
  EXPECT_NE(check(dir + "/header").json["error"].get<std::string>().find("truncated record header"), std::string::npos);
}

TEST(TensorBoard, BackgroundFlushMakesRecordsVisibleWhileOpen) {
  const std::string dir = testing::temp_dir("tb");
  TensorBoardSink sink(dir, /*flush_secs=*/0.05);
  const auto before = fs::file_size(sink.path());
  sink.write(1, {{"x", 1.0}});  // one record: below max_pending, so only the flusher writes it
  // Not a timing assertion: a generous bound for a 50 ms flush interval on a busy machine.
  for (int i = 0; i < 200 && fs::file_size(sink.path()) == before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_GT(fs::file_size(sink.path()), before);
  const auto c = check(sink.path());
  ASSERT_EQ(c.rc, 0) << c.json.dump();
  EXPECT_EQ(c.json["events"][1]["values"][0]["simple_value"], 1.0);
}

TEST(TensorBoard, TwoWritersInOneSecondGetTwoFiles) {
  const std::string dir = testing::temp_dir("tb");
  TensorBoardSink a(dir), b(dir);
  EXPECT_NE(a.path(), b.path());
}

}  // namespace
}  // namespace xtrain::monitor::tensorboard_test
