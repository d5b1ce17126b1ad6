// Paths tests need: the source tree (fixtures), the build tree (the xtrain binary), a fresh
// temporary folder per test, and Debian's python with torch for optional live cross-checks.
#pragma once
#include <string>

namespace xtrain::testing {

std::string source_dir();
std::string binary_dir();
std::string fixture(const std::string& relative);  // tests/reference/fixtures/<relative>
std::string xtrain_binary();
// A new empty folder under $TMPDIR, removed at process exit unless XTRAIN_KEEP_TMP is set.
std::string temp_dir(const std::string& tag);
// <dir>/corpus.txt: n sentences "the quick brown fox <i % modulo><tail>" (a tiny text dataset for
// trainer tests). Returns its path.
std::string write_corpus(const std::string& dir, int n, int modulo,
                         const std::string& tail = " jumps over the lazy dog. ");
// Runs a shell command; returns exit status and fills `output` with stdout+stderr.
int run_command(const std::string& command, std::string* output = nullptr);

}  // namespace xtrain::testing
