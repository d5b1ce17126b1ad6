// base/plugin.h: a --plugin that is missing or not a library is a UsageError naming the path (and
// dlerror()); a real shared library loads once and is listed by its canonical path. The full path
// (a plugin registering a model that xtrain train then builds) is tests/e2e/examples.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "xtrain/base/error.h"
#include "xtrain/base/plugin.h"

namespace xtrain::plugin_test {
namespace {
namespace fs = std::filesystem;

std::string usage_message(const std::string& path) {
  try {
    plugin::load(path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Plugin, MissingFileNamesThePathAndTheFlag) {
  const std::string path = (fs::temp_directory_path() / "xtrain_no_such_plugin.so").string();
  const std::string msg = usage_message(path);
  EXPECT_NE(msg.find("--plugin " + path + ": no such file"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("cannot load"), std::string::npos) << msg;
}

TEST(Plugin, NotALibraryGivesDlerror) {
  const fs::path path = fs::temp_directory_path() / "xtrain_not_a_plugin.so";
  std::ofstream(path) << "not an ELF file\n";
  const std::string msg = usage_message(path.string());
  fs::remove(path);
  EXPECT_NE(msg.find("--plugin " + path.string() + ": cannot load it: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("xtrain_not_a_plugin.so"), std::string::npos) << msg;  // dlerror() names the file too
}

TEST(Plugin, ARealLibraryLoadsOnceByCanonicalPath) {
  const fs::path zlib = "/lib/x86_64-linux-gnu/libz.so.1";  // a symlink: listed by its target
  if (!fs::exists(zlib)) GTEST_SKIP() << zlib << " is not on this machine";
  plugin::load(zlib.string());
  plugin::load(fs::canonical(zlib).string());
  const auto loaded = plugin::loaded();
  EXPECT_EQ(std::count(loaded.begin(), loaded.end(), fs::canonical(zlib).string()), 1);
}

}  // namespace
}  // namespace xtrain::plugin_test
