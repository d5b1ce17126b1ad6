#include "support/paths.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

namespace xtrain::testing {
namespace fs = std::filesystem;

std::string source_dir() { return XTRAIN_SOURCE_DIR; }
std::string binary_dir() { return XTRAIN_BINARY_DIR; }
std::string fixture(const std::string& relative) {
  return source_dir() + "/tests/reference/fixtures/" + relative;
}
std::string xtrain_binary() { return binary_dir() + "/xtrain"; }

namespace {
std::vector<std::string>& temp_dirs() {
  static auto* dirs = new std::vector<std::string>;  // never destroyed: the atexit handler uses it
  return *dirs;
}
void remove_temp_dirs() {
  if (std::getenv("XTRAIN_KEEP_TMP")) return;
  for (const auto& d : temp_dirs()) {
    std::error_code ec;
    fs::remove_all(d, ec);
  }
}
}  // namespace

std::string temp_dir(const std::string& tag) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(remove_temp_dirs); });
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base ? base : "/tmp") + "/xtrain-" + tag + "-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  const char* made = mkdtemp(buf.data());
  if (made == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
  temp_dirs().emplace_back(made);
  return made;
}

int run_command(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string write_corpus(const std::string& dir, int n, int modulo, const std::string& tail) {
  const std::string path = dir + "/corpus.txt";
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) out << "the quick brown fox " << i % modulo << tail;
  return path;
}

}  // namespace xtrain::testing
