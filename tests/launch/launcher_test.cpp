// The launcher end to end with a fake rank command (/bin/sh scripts): environment variables,
// "[rank N] " prefixes, the failing rank's exit code, Ctrl-C forwarding, and elastic restarts
// from the latest checkpoint with the fault-injection variable passed once.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/launch/launcher.h"

namespace xtrain::launch::launcher_test {
namespace {

struct Captured {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `script` as every rank (sh -c script sh ARGS...), capturing the prefixed output.
Captured run_script(int nproc, const std::string& script, std::vector<std::string> extra = {}, int restarts = 0) {
  const std::string dir = testing::temp_dir("launch");
  const int out = ::open((dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = ::open((dir + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  LaunchOptions o;
  o.nproc_per_node = nproc;
  o.master_port = testing::free_port();
  o.program = "/bin/sh";
  o.args = {"-c", script, "sh"};
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  o.max_restarts = restarts;
  o.grace_seconds = 2;
  o.out_fd = out;
  o.err_fd = err;
  Captured c;
  c.code = launch(o);
  ::close(out);
  ::close(err);
  c.out = slurp(dir + "/out");
  c.err = slurp(dir + "/err");
  return c;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Launcher, SetsTorchrunVariablesAndPrefixesOutput) {
  const auto c = run_script(2,
                            "echo \"RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE "
                            "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE MASTER_ADDR=$MASTER_ADDR OMP=$OMP_NUM_THREADS "
                            "XT=$XTRAIN_THREADS\"; echo \"to stderr\" >&2; printf 'no newline'");
  EXPECT_EQ(c.code, 0) << c.err;
  for (int r = 0; r < 2; ++r) {
    const std::string p = "[rank " + std::to_string(r) + "] ";
    EXPECT_TRUE(contains(c.out, p + "RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) +
                                    " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 OMP="))
        << c.out;
    EXPECT_TRUE(contains(c.out, p + "no newline\n")) << c.out;
    EXPECT_TRUE(contains(c.err, p + "to stderr\n")) << c.err;
  }
  EXPECT_FALSE(contains(c.out, "OMP= ")) << "thread variables must be set: " << c.out;
  // Every line carries a prefix: nothing from the ranks is interleaved mid-line.
  std::stringstream lines(c.out);
  for (std::string line; std::getline(lines, line);) EXPECT_EQ(line.rfind("[rank ", 0), 0u) << line;
}

TEST(Launcher, ExitsWithTheFailingRanksCodeAndStopsTheOthers) {
  const auto c = run_script(3, "if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 7; fi; echo up; exec sleep 30");
  EXPECT_EQ(c.code, 7);
  EXPECT_TRUE(contains(c.err, "launch: rank 1 exited with code 7")) << c.err;
}

TEST(Launcher, ARankKilledBySignalGivesOneHundredTwentyEightPlusTheSignal) {
  const auto c = run_script(2, "if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; exec sleep 30");
  EXPECT_EQ(c.code, 128 + SIGKILL);
  EXPECT_TRUE(contains(c.err, "rank 0 was killed by SIGKILL")) << c.err;
}

// Restarts: rank 1 dies by SIGKILL on the first attempt after "writing a checkpoint"; the second
// attempt must get --resume and no XTRAIN_FAULT_AT_STEP.
TEST(Launcher, ElasticRestartResumesFromTheLatestCheckpoint) {
  const std::string run = testing::temp_dir("elastic");
  ::setenv("XTRAIN_FAULT_AT_STEP", "3:1", 1);
  const auto c = run_script(2,
                            "echo \"attempt=$XTRAIN_RESTART_COUNT fault=${XTRAIN_FAULT_AT_STEP:-none} args=$*\"; "
                            "if [ \"$XTRAIN_RESTART_COUNT\" = 0 ] && [ \"$RANK\" = 1 ]; then "
                            "mkdir -p \"$2/checkpoints\"; printf global_step3 > \"$2/checkpoints/latest\"; kill -9 $$; fi;"
                            "if [ \"$XTRAIN_RESTART_COUNT\" = 0 ]; then exec sleep 30; fi",
                            {"--output", run}, /*restarts=*/2);
  ::unsetenv("XTRAIN_FAULT_AT_STEP");
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(contains(c.out, "attempt=0 fault=3:1 args=--output " + run + "\n")) << c.out;
  EXPECT_TRUE(contains(c.out, "attempt=1 fault=none args=--output " + run + " --resume\n")) << c.out;
  EXPECT_TRUE(contains(c.err, "rank 1 was killed by SIGKILL after")) << c.err;
  EXPECT_TRUE(contains(c.err, "restart 1/2 from the latest checkpoint (global_step3)")) << c.err;
}

TEST(Launcher, ElasticGivesUpAfterMaxRestarts) {
  const std::string run = testing::temp_dir("elastic-fail");
  const auto c = run_script(2, "if [ \"$RANK\" = 0 ]; then exit 5; fi; exec sleep 30", {"-o", run}, 1);
  EXPECT_EQ(c.code, 5);
  EXPECT_TRUE(contains(c.err, "restart 1/1 from the start (no checkpoint yet)")) << c.err;
  EXPECT_TRUE(contains(c.err, "no restarts left (--max-restarts 1)")) << c.err;
}

TEST(Launcher, UsageErrors) {
  LaunchOptions o;
  EXPECT_THROW(launch(o), UsageError);  // no command
  o.args = {"train"};
  o.max_restarts = 2;
  try {
    launch(o);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_TRUE(contains(e.what(), "--max-restarts needs the train command's --output")) << e.what();
  }
  o.max_restarts = 0;
  o.include = "a";
  EXPECT_THROW(launch(o), UsageError);
}

TEST(Launcher, CommandHelpers) {
  EXPECT_EQ(output_dir_of({"train", "--output", "runs/a"}), "runs/a");
  EXPECT_EQ(output_dir_of({"train", "-o", "b"}), "b");
  EXPECT_EQ(output_dir_of({"train", "--output=c"}), "c");
  EXPECT_FALSE(output_dir_of({"train", "--config", "x"}));
  EXPECT_EQ(restart_args({"train", "-o", "r"}, true), (std::vector<std::string>{"train", "-o", "r", "--resume"}));
  EXPECT_EQ(restart_args({"train", "--resume"}, true), (std::vector<std::string>{"train", "--resume"}));
  EXPECT_EQ(restart_args({"train"}, false), (std::vector<std::string>{"train"}));
}

// Ctrl-C: the launcher runs in a child process of this test (it installs signal handlers).
TEST(LaunchWorker, Interruptible) {
  XTRAIN_WORKER_ONLY();
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.master_port = testing::free_port();
  o.program = "/bin/sh";
  o.args = {"-c", "trap 'echo \"got INT\"; exit 3' INT; echo \"pid $$\"; echo ready; while :; do sleep 0.05; done"};
  o.grace_seconds = 5;
  const int code = launch(o);
  std::ofstream(testing::worker_env("XTRAIN_TEST_RESULT")) << code;
}

TEST(Launcher, CtrlCStopsEveryRankCleanly) {
  const std::string dir = testing::temp_dir("ctrlc");
  auto p = testing::Process::start(testing::self_test_argv("LaunchWorker.Interruptible"),
                                   {{"XTRAIN_TEST_WORKER", "1"}, {"XTRAIN_TEST_RESULT", dir + "/code"}},
                                   dir + "/out");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(contains(p.output(), "[rank 0] ready") && contains(p.output(), "[rank 1] ready")) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  p.signal(SIGINT);
  ASSERT_TRUE(p.wait(60)) << p.output();
  const std::string out = p.output();
  EXPECT_EQ(p.exit_code(), 0) << out;
  EXPECT_EQ(slurp(dir + "/code"), "130") << out;  // 128 + SIGINT
  EXPECT_TRUE(contains(out, "[rank 0] got INT")) << out;
  EXPECT_TRUE(contains(out, "[rank 1] got INT")) << out;
  EXPECT_TRUE(contains(out, "interrupted by SIGINT")) << out;
  // The ranks are gone (reaped by the launcher), not orphaned.
  std::stringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("] pid ");
    if (at != std::string::npos) {
      EXPECT_NE(::kill(std::stoi(line.substr(at + 6)), 0), 0) << line;
    }
  }
}

}  // namespace
}  // namespace xtrain::launch::launcher_test
