// The layout under a checkpoints root: <root>/<tag>/ (committed), <root>/.tmp-* (in progress or
// left by a crash: readers skip every dot-name), <root>/latest. Commit order comes from the
// manifests' `seq`, so renaming or copying folders does not reorder tags.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::checkpoint {

constexpr const char* kTmpPrefix = ".tmp-";
constexpr const char* kLatestName = "latest";

// UsageError unless `tag` is a usable folder name (not empty, no '/', no leading '.', not "latest").
void check_tag(const std::string& tag);
// Internal-assert-style check for file names chosen by code.
void check_file_name(const std::string& file);

struct TagInfo {
  std::string tag;
  int64_t seq = 0;
  int64_t mtime_ns = 0;  // of manifest.json; a tiebreak only
};
// Committed tags (folders with a readable manifest.json), oldest first.
std::vector<TagInfo> scan_tags(const std::string& root);

// The sentence a load error ends with: which tag to fall back to, or that there is none.
std::string fallback_hint(const std::string& root, const std::string& bad_tag);

bool is_directory(const std::string& path);
bool is_regular_file(const std::string& path);

}  // namespace xtrain::checkpoint
