// manifest.json, the last file of a checkpoint: format version, tag, commit sequence number (the
// order of tags: robust where mtimes are not), and per file its size, SHA-256 and kind
// ("tensors" | "text"), plus the caller's `extra` object. Also the per-rank file records that
// finish_rank() leaves for commit().
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace xtrain::checkpoint {

constexpr int64_t kManifestFormat = 1;
constexpr const char* kManifestName = "manifest.json";

struct FileEntry {
  int64_t bytes = 0;
  std::string sha256;
  std::string kind;  // "tensors" | "text"
};
using FileTable = std::map<std::string, FileEntry>;

struct Manifest {
  int64_t format = kManifestFormat;
  std::string tag;
  int64_t seq = 0;  // 1 for the first commit under a root, then increasing
  FileTable files;
  std::string extra_json = "{}";  // a JSON object

  std::string to_json() const;
  // UsageError naming `where` when the text is not a manifest this version can read.
  static Manifest parse(const std::string& text, const std::string& where);
};

std::string file_table_to_json(const FileTable& files);
FileTable file_table_from_json(const std::string& text, const std::string& where);

}  // namespace xtrain::checkpoint
