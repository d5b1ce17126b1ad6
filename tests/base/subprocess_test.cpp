// base/subprocess: PATH lookup, environment additions and removals, output to files and to a pipe,
// exit codes and signals, process groups, and a program that cannot be executed. The children are
// /bin/sh one-liners, so each expectation is what POSIX sh prints or returns.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/base/subprocess.h"

namespace xtrain::subprocess_test {
namespace {

SpawnOptions shell(const std::string& script, const std::string& dir) {
  SpawnOptions o;
  o.argv = {"sh", "-c", script};
  o.stdout_path = dir + "/out.txt";
  o.stderr_path = dir + "/err.txt";
  return o;
}

TEST(Subprocess, FindsProgramsOnPath) {
  const std::string sh = find_executable("sh");
  ASSERT_FALSE(sh.empty());
  EXPECT_EQ(sh.substr(sh.size() - 3), "/sh");
  EXPECT_EQ(find_executable(sh), sh);
  EXPECT_EQ(find_executable("xtrain-no-such-program"), "");
  const auto dir = testing::temp_dir("subprocess_find");
  write_file_atomic(dir + "/data.txt", "not a program");  // mode 0644
  EXPECT_EQ(find_executable(dir + "/data.txt"), "") << "not executable";
  EXPECT_EQ(find_executable("/"), "") << "a folder is not a program";
}

TEST(Subprocess, EnvironmentAndOutputFiles) {
  const auto dir = testing::temp_dir("subprocess_env");
  ::setenv("XTRAIN_SUBPROCESS_DROP", "dropped", 1);
  ::setenv("XTRAIN_SUBPROCESS_KEEP", "kept", 1);
  ::setenv("XTRAIN_SUBPROCESS_SET", "old", 1);
  auto o = shell("echo \"$XTRAIN_SUBPROCESS_SET ${XTRAIN_SUBPROCESS_DROP-unset} $XTRAIN_SUBPROCESS_KEEP\"; "
                 "echo oops >&2; exit 3",
                 dir);
  o.env = {{"XTRAIN_SUBPROCESS_SET", "new"}};
  o.unset_env = {"XTRAIN_SUBPROCESS_DROP"};
  const ProcessExit e = wait_process(spawn_process(o));
  EXPECT_EQ(e.code, 3);
  EXPECT_EQ(e.signal, 0);
  EXPECT_EQ(read_file(dir + "/out.txt"), "new unset kept\n");
  EXPECT_EQ(read_file(dir + "/err.txt"), "oops\n");
  wait_process(spawn_process(shell("echo again", dir)));
  EXPECT_EQ(read_file(dir + "/out.txt"), "new unset kept\nagain\n") << "output files are appended to";
}

TEST(Subprocess, OutputIntoAPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  SpawnOptions o;
  o.argv = {"sh", "-c", "printf piped"};
  o.stdout_fd = fds[1];
  const pid_t pid = spawn_process(o);
  ::close(fds[1]);
  char buf[16] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf);
  ::close(fds[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "piped");
  EXPECT_EQ(wait_process(pid).code, 0);
}

// True once `pid` has exited: gone, or a zombie nobody reaped yet (containers may lack an init).
bool has_exited(const std::string& pid) {
  std::string stat;
  try {
    stat = read_file("/proc/" + pid + "/stat");
  } catch (const UsageError&) {
    return true;
  }
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

TEST(Subprocess, ProcessGroupAndSignals) {
  const auto dir = testing::temp_dir("subprocess_group");
  // The sleep is a grandchild in the child's group; its pid goes to a file.
  const pid_t pid = spawn_process(shell("sleep 30 & echo $! > " + dir + "/sleep.pid; wait", dir));
  EXPECT_EQ(::getpgid(pid), pid);
  EXPECT_FALSE(try_wait(pid).has_value());
  std::string sleep_pid;
  for (int i = 0; i < 250 && sleep_pid.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    try {
      sleep_pid = read_file(dir + "/sleep.pid");
    } catch (const UsageError&) {
    }
    if (!sleep_pid.empty() && sleep_pid.back() != '\n') sleep_pid.clear();  // not fully written yet
  }
  ASSERT_FALSE(sleep_pid.empty());
  sleep_pid.pop_back();
  EXPECT_FALSE(has_exited(sleep_pid));
  kill_group(pid, SIGTERM);
  const ProcessExit e = wait_process(pid);
  EXPECT_EQ(e.signal, SIGTERM);
  EXPECT_EQ(e.code, 128 + SIGTERM);
  for (int i = 0; i < 250 && !has_exited(sleep_pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(has_exited(sleep_pid)) << "the grandchild got the signal too";
}

TEST(Subprocess, ProgramThatCannotRunExits127WithAMessage) {
  const auto dir = testing::temp_dir("subprocess_missing");
  SpawnOptions o;
  o.argv = {dir + "/no-such-program", "x"};
  o.stderr_path = dir + "/err.txt";
  o.exec_error = "test: cannot execute";
  EXPECT_EQ(wait_process(spawn_process(o)).code, 127);
  EXPECT_EQ(read_file(dir + "/err.txt"), "test: cannot execute: " + dir + "/no-such-program\n");
  o.stderr_path = dir + "/missing-folder/err.txt";
  try {
    spawn_process(o);
    ADD_FAILURE() << "an output file that cannot be opened must throw";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/missing-folder/err.txt"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xtrain::subprocess_test
