// DurableWriter and friends: thin wrappers over POSIX calls with errno in every message.
#include "xtrain/checkpoint/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "xtrain/base/error.h"

namespace xtrain::checkpoint {
namespace {

[[noreturn]] void fail(const char* what, const std::string& path) {
  XTRAIN_USAGE_ERROR("checkpoint: cannot ", what, " ", path, ": ", std::strerror(errno));
}

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

DurableWriter::DurableWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", path);
}

DurableWriter::~DurableWriter() {
  if (fd_ >= 0) ::close(fd_);
}

size_t DurableWriter::write(const void* data, size_t n) {
  TORCH_INTERNAL_ASSERT(fd_ >= 0, "DurableWriter::write after close");
  const auto* p = static_cast<const char*>(data);
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::write(fd_, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("write", path_);
    done += size_t(w);
  }
  hash_.update(data, n);
  bytes_ += int64_t(n);
  return n;
}

FileDigest DurableWriter::close() {
  TORCH_INTERNAL_ASSERT(fd_ >= 0, "DurableWriter::close twice");
  if (::fsync(fd_) != 0) fail("fsync", path_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close", path_);
  return FileDigest{bytes_, hash_.finish_hex()};
}

FileDigest write_durable(const std::string& path, const std::string& bytes) {
  DurableWriter out(path);
  out.write(bytes.data(), bytes.size());
  return out.close();
}

FileDigest digest_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("open", path);
  Sha256 hash;
  int64_t total = 0;
  std::vector<char> buf(size_t(1) << 20);
  for (;;) {
    const ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ::close(fd);
      fail("read", path);
    }
    if (r == 0) break;
    hash.update(buf.data(), size_t(r));
    total += r;
  }
  ::close(fd);
  return FileDigest{total, hash.finish_hex()};
}

std::string read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) fail("open", path);
  std::string out;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) fail("read", path);
  return out;
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("open folder", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail("fsync folder", dir);
}

void replace_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string dir = parent_of(path);
  const std::string tmp = dir + "/.tmp-" + path.substr(path.find_last_of('/') + 1);
  write_durable(tmp, bytes);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename into", path);
  fsync_dir(dir);
}

}  // namespace xtrain::checkpoint
