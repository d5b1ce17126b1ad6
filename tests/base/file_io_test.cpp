// base/file_io: whole-file reads and atomic durable writes. The crash cases run the writer in a
// forked child whose file size limit (RLIMIT_FSIZE) stops it part way through the temp file: once
// with SIGXFSZ ignored (write fails, the writer must throw and clean up) and once with SIGXFSZ's
// default action (the process dies mid-write, a real crash). Either way the target keeps its old bytes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"

namespace xtrain::file_io_test {
namespace {
namespace fs = std::filesystem;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

TEST(FileIo, RoundTripKeepsEveryByte) {
  const auto dir = testing::temp_dir("file_io_round_trip");
  std::string bytes;
  for (int i = 0; i < 200000; ++i) bytes += static_cast<char>((i * 131 + 7) % 256);  // NULs included
  write_file_atomic(dir + "/a.bin", bytes);
  EXPECT_EQ(read_file(dir + "/a.bin"), bytes);
  write_file_atomic(dir + "/a.bin", "short");  // replacing truncates
  EXPECT_EQ(read_file(dir + "/a.bin"), "short");
  write_file_atomic(dir + "/empty", "");
  EXPECT_EQ(read_file(dir + "/empty"), "");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 2) << "no temp file left";
}

TEST(FileIo, MissingFileMessageNamesThePath) {
  const auto dir = testing::temp_dir("file_io_missing");
  const std::string path = dir + "/nope.json";
  const auto m = message_of([&] { read_file(path); });
  EXPECT_NE(m.find("cannot read " + path), std::string::npos) << m;
  EXPECT_NE(m.find("No such file"), std::string::npos) << m;
  const auto d = message_of([&] { read_file(dir); });
  EXPECT_NE(d.find("cannot read " + dir), std::string::npos) << d;
}

TEST(FileIo, FailedWriteLeavesTheOldFileWhole) {
  const auto dir = testing::temp_dir("file_io_fail");
  const std::string path = dir + "/state.json";
  write_file_atomic(path, "old");
  fs::create_directory(dir + "/.state.json.tmp");  // the temp file cannot be created
  const auto m = message_of([&] { write_file_atomic(path, "new"); });
  EXPECT_NE(m.find("cannot replace " + path), std::string::npos) << m;
  EXPECT_NE(m.find(dir + "/.state.json.tmp"), std::string::npos) << m;
  EXPECT_EQ(read_file(path), "old");
  const auto missing = message_of([&] { write_file_atomic(dir + "/no/such/folder/x", "new"); });
  EXPECT_NE(missing.find(dir + "/no/such/folder/"), std::string::npos) << missing;
}

TEST(FileIo, ReadOnlyFolderFailsCleanly) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores folder permissions (the other crash tests cover this)";
  const auto dir = testing::temp_dir("file_io_read_only");
  const std::string path = dir + "/state.json";
  write_file_atomic(path, "old");
  ::chmod(dir.c_str(), 0555);
  const auto m = message_of([&] { write_file_atomic(path, "new"); });
  ::chmod(dir.c_str(), 0755);
  EXPECT_NE(m.find("cannot create"), std::string::npos) << m;
  EXPECT_EQ(read_file(path), "old");
}

// Runs write_file_atomic(path, 1 MiB) in a child limited to 64 KiB per file. Returns the wait status.
int write_in_limited_child(const std::string& path, bool ignore_sigxfsz) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (ignore_sigxfsz) ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim {65536, 65536};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      write_file_atomic(path, std::string(1 << 20, 'n'));
    } catch (const UsageError& e) {
      ::_exit(std::string(e.what()).find(path) != std::string::npos ? 3 : 4);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(FileIo, WriterCrashLeavesTheOldFileWhole) {
  const auto dir = testing::temp_dir("file_io_crash");
  const std::string path = dir + "/state.json", old(1000, 'o');
  write_file_atomic(path, old);
  const int failed = write_in_limited_child(path, /*ignore_sigxfsz=*/true);
  ASSERT_TRUE(WIFEXITED(failed));
  EXPECT_EQ(WEXITSTATUS(failed), 3) << "the write must fail with a UsageError that names the file";
  EXPECT_EQ(read_file(path), old);
  EXPECT_FALSE(fs::exists(dir + "/.state.json.tmp")) << "a failed write removes its temp file";
  const int killed = write_in_limited_child(path, /*ignore_sigxfsz=*/false);
  ASSERT_TRUE(WIFSIGNALED(killed));
  EXPECT_EQ(WTERMSIG(killed), SIGXFSZ);
  EXPECT_EQ(read_file(path), old);
  write_file_atomic(path, "after");  // a torn temp file from the crash does not block the next write
  EXPECT_EQ(read_file(path), "after");
}

}  // namespace
}  // namespace xtrain::file_io_test
