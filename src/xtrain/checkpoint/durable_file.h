// Crash-safe file primitives for checkpoints: every byte written is hashed on the way out
// (SHA-256, so no second read), files are fsynced before they count as written, and renames are
// followed by an fsync of the folder that holds them. POSIX only (open/write/fsync/rename).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "xtrain/base/sha256.h"

namespace xtrain::checkpoint {

struct FileDigest {
  int64_t bytes = 0;
  std::string sha256;
};

// Writes a new file (truncating an old one); close() fsyncs and returns size and digest.
class DurableWriter {
 public:
  explicit DurableWriter(const std::string& path);
  ~DurableWriter();  // closes without fsync if close() was never reached (an error path)
  DurableWriter(const DurableWriter&) = delete;
  DurableWriter& operator=(const DurableWriter&) = delete;
  // Returns n (the signature PyTorchStreamWriter's writer function wants); UsageError on failure.
  size_t write(const void* data, size_t n);
  FileDigest close();

 private:
  std::string path_;
  int fd_ = -1;
  Sha256 hash_;
  int64_t bytes_ = 0;
};

FileDigest write_durable(const std::string& path, const std::string& bytes);
// Reads a whole file and hashes it; UsageError when it cannot be read.
FileDigest digest_file(const std::string& path);
std::string read_file(const std::string& path);
void fsync_dir(const std::string& dir);
// Replaces `path` atomically: <dir>/.tmp-<name>, fsync, rename, fsync the folder.
void replace_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace xtrain::checkpoint
