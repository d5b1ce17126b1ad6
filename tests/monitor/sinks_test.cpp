// CSV monitor files in DeepSpeed's format, and the sink set chosen by the monitor keys.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/paths.h"
#include "xtrain/monitor/csv_sink.h"
#include "xtrain/monitor/sinks.h"

namespace xtrain::monitor::sinks_test {
namespace {
namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(CsvSink, OneFilePerTagWithDeepSpeedsHeader) {
  const std::string dir = testing::temp_dir("csv") + "/job";
  {
    CsvSink sink(dir);
    sink.write(1, {{"Train/Samples/train_loss", 2.5}, {"val acc", 0.125}});
    sink.write(2, {{"Train/Samples/train_loss", 2.25}});
  }
  EXPECT_EQ(read_all(dir + "/Train_Samples_train_loss.csv"), "step,train_loss\n1,2.5\n2,2.25\n");
  EXPECT_EQ(read_all(dir + "/val_acc.csv"), "step,val acc\n1,0.125\n");
  CsvSink resumed(dir);  // a resumed run appends without a second header
  resumed.write(3, {{"Train/Samples/train_loss", 1e-7}});
  EXPECT_EQ(read_all(dir + "/Train_Samples_train_loss.csv"), "step,train_loss\n1,2.5\n2,2.25\n3,1e-07\n");
}

TEST(Sinks, FoldersFollowTheMonitorKeys) {
  const std::string run = testing::temp_dir("sinks") + "/run";
  SinkOptions tb, csv;
  tb.enabled = csv.enabled = true;
  {
    auto sinks = make_sinks(tb, csv, run);
    sinks->write(1, {{"train/loss", 1.0}});
    sinks->write_text(1, "note", "hello");
  }
  EXPECT_TRUE(fs::exists(run + "/metrics.jsonl"));
  EXPECT_TRUE(fs::exists(run + "/csv/train_loss.csv"));
  int events = 0;
  for (const auto& e : fs::directory_iterator(run)) {
    events += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  }
  EXPECT_EQ(events, 1);
  const std::string out = testing::temp_dir("sinks");
  tb.output_path = csv.output_path = out;
  tb.job_name = "tbjob";
  csv.job_name = "csvjob";
  EXPECT_EQ(tensorboard_dir(tb, run), out + "/tbjob");
  EXPECT_EQ(csv_dir(csv, run), out + "/csvjob");
  tb.enabled = csv.enabled = false;
  auto only_jsonl = make_sinks(tb, csv, run);
  only_jsonl->write(2, {{"train/loss", 0.5}});
  EXPECT_FALSE(fs::exists(out + "/tbjob"));
}

}  // namespace
}  // namespace xtrain::monitor::sinks_test
