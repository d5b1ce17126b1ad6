// Whole-file reads and crash-safe whole-file writes, the one place that knows the POSIX sequence:
// a temp file beside the target, write, fsync the file, rename over the target, fsync the folder
// (so after a crash the target is either the old file or the new one, never a torn mix).
// DurableFile is the streaming half of that sequence for writers that produce bytes in pieces.
#pragma once
#include <cstddef>
#include <string>

namespace xtrain {

// The file's bytes; UsageError "cannot read <path>: <reason>" when missing or unreadable.
std::string read_file(const std::string& path);

// Replaces `path` atomically and durably. The temp file is <dir>/.<name>.tmp: hidden, and not
// ending in the target's extension, so folder scans (`*.json`) never pick up a torn one.
// On failure a UsageError names the path and the temp file; the old file is then untouched.
void write_file_atomic(const std::string& path, const std::string& bytes);

// fsync of a folder, so that a rename or a new file in it survives a crash.
void fsync_dir(const std::string& dir);

// The folder part of a path ("." when none).
std::string parent_dir(const std::string& path);

// Creates (truncating) `path`; write() writes everything or throws; close() fsyncs and closes.
// Every error is a UsageError with the path and strerror.
class DurableFile {
 public:
  explicit DurableFile(const std::string& path);
  ~DurableFile();  // closes without fsync when close() was never reached (an error path)
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;
  void write(const void* data, size_t n);
  void close();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace xtrain
