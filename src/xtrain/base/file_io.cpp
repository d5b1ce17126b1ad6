// POSIX open/read/write/fsync/rename with errno in every message.
#include "xtrain/base/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <c10/util/Exception.h>

#include "xtrain/base/error.h"

namespace xtrain {
namespace {

[[noreturn]] void fail(const char* what, const std::string& path, int err) {
  XTRAIN_USAGE_ERROR("cannot ", what, " ", path, ": ", std::strerror(err));
}

}  // namespace

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("read", path, errno);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;  // EISDIR for a folder
      ::close(fd);
      fail("read", path, err);
    }
    if (r == 0) break;
    out.append(buf, size_t(r));
  }
  ::close(fd);
  return out;
}

std::string parent_dir(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("open folder", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail("fsync folder", dir, err);
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string dir = parent_dir(path);
  const std::string tmp = dir + "/." + path.substr(path.find_last_of('/') + 1) + ".tmp";
  try {
    DurableFile out(tmp);
    out.write(bytes.data(), bytes.size());
    out.close();
  } catch (const UsageError& e) {
    ::unlink(tmp.c_str());
    XTRAIN_USAGE_ERROR("cannot replace ", path, " (the old file is unchanged): ", e.what());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("rename into", path, err);
  }
  fsync_dir(dir);
}

DurableFile::DurableFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", path, errno);
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFile::write(const void* data, size_t n) {
  TORCH_INTERNAL_ASSERT(fd_ >= 0, "DurableFile::write after close: ", path_);
  const auto* p = static_cast<const char*>(data);
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::write(fd_, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("write", path_, w < 0 ? errno : ENOSPC);
    done += size_t(w);
  }
}

void DurableFile::close() {
  TORCH_INTERNAL_ASSERT(fd_ >= 0, "DurableFile::close twice: ", path_);
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    fail("fsync", path_, err);
  }
  if (::close(fd) != 0) fail("close", path_, errno);
}

}  // namespace xtrain
