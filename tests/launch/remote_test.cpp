// Remote command lines: the quoted remote command, run through a real /bin/sh, must deliver every
// argument and environment value byte for byte, however hostile, and must not run anything else.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/launch/remote.h"

namespace xtrain::launch::remote_test {
namespace {

const std::vector<std::string> kHostile{"plain",       "two words",  "it's",        "'",          "''",
                                        "\"quoted\"",  "$(touch PWNED)", "`touch PWNED`", "; touch PWNED",
                                        "a\nb",        "back\\slash", "*",          "$HOME",      "",
                                        "-c",          "'; touch PWNED; '", "&& touch PWNED", "\t"};

TEST(Remote, ShellQuoteRoundTripsThroughSh) {
  const std::string dir = testing::temp_dir("quote");
  // printf '%s\0' prints each argument followed by a NUL: exact bytes, nothing interpreted.
  std::vector<std::string> command{"printf", "%s\\0"};
  command.insert(command.end(), kHostile.begin(), kHostile.end());
  const auto argv = ssh_argv("worker-0", dir, {{"XT_VALUE", "$(touch PWNED) 'x'"}}, command);
  const std::string remote = argv.back();
  auto p = testing::Process::start({"/bin/sh", "-c", remote + "; printf '%s' \"$XT_VALUE\""}, {},
                                   dir + "/out.txt");
  ASSERT_TRUE(p.wait(30));
  EXPECT_EQ(p.exit_code(), 0);
  std::string expected;
  for (const auto& a : kHostile) expected += a + std::string(1, '\0');
  EXPECT_EQ(p.output(), expected);  // exec replaced the shell: the trailing printf never ran
  EXPECT_FALSE(std::filesystem::exists(dir + "/PWNED"));
}

TEST(Remote, EnvironmentValuesArriveVerbatim) {
  const std::string dir = testing::temp_dir("quote-env");
  const auto argv = ssh_argv("h", dir, {{"A", "it's $(touch PWNED)"}, {"B", ""}}, {"sh", "-c", "printf '%s|%s' \"$A\" \"$B\""});
  auto p = testing::Process::start({"/bin/sh", "-c", argv.back()}, {}, dir + "/out.txt");
  ASSERT_TRUE(p.wait(30));
  EXPECT_EQ(p.output(), "it's $(touch PWNED)|");
  EXPECT_FALSE(std::filesystem::exists(dir + "/PWNED"));
}

TEST(Remote, SshArgvKeepsTheHostOutOfTheShellString) {
  const auto argv = ssh_argv("worker-0", "/runs", {{"RANK", "3"}}, {"/opt/xtrain", "train"});
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(argv[0], "ssh");
  EXPECT_EQ(argv[argv.size() - 3], "--");  // nothing after this is an ssh option
  EXPECT_EQ(argv[argv.size() - 2], "worker-0");
  EXPECT_EQ(argv.back(), "cd '/runs' && exec 'env' 'RANK=3' '/opt/xtrain' 'train'");
  for (const char* bad : {"-oProxyCommand=id", "a;b", "$(id)", "h x", ""}) {
    EXPECT_THROW(ssh_argv(bad, "/", {}, {"x"}), UsageError) << bad;
  }
  EXPECT_THROW(ssh_argv("h", "/", {{"A;B", "1"}}, {"x"}), UsageError);
}

TEST(Remote, ShellQuote) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_join({"a b", "c"}), "'a b' 'c'");
  EXPECT_TRUE(is_local_host("localhost"));
  EXPECT_TRUE(is_local_host("127.0.0.1"));
  EXPECT_FALSE(is_local_host("worker-0.invalid"));
}

}  // namespace
}  // namespace xtrain::launch::remote_test
