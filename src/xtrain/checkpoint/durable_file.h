// Checkpoint files with digests: every byte written is hashed on the way out (SHA-256, so no second
// read) and fsynced before it counts as written. The POSIX sequence itself (write, fsync, rename,
// fsync the folder) and whole-file reads are base/file_io.h's; this layer adds the hashing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "xtrain/base/file_io.h"  // read_file, fsync_dir, write_file_atomic for checkpoint code
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
  DurableWriter(const DurableWriter&) = delete;
  DurableWriter& operator=(const DurableWriter&) = delete;
  // Returns n (the signature PyTorchStreamWriter's writer function wants); UsageError on failure.
  size_t write(const void* data, size_t n);
  FileDigest close();

 private:
  DurableFile file_;
  Sha256 hash_;
  int64_t bytes_ = 0;
};

FileDigest write_durable(const std::string& path, const std::string& bytes);
// Reads a whole file and hashes it; UsageError when it cannot be read.
FileDigest digest_file(const std::string& path);

}  // namespace xtrain::checkpoint
