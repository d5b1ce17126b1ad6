// DurableWriter: base's DurableFile plus a running SHA-256; digest_file hashes while it reads.
#include "xtrain/checkpoint/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "xtrain/base/error.h"

namespace xtrain::checkpoint {

DurableWriter::DurableWriter(const std::string& path) : file_(path) {}

size_t DurableWriter::write(const void* data, size_t n) {
  file_.write(data, n);
  hash_.update(data, n);
  bytes_ += int64_t(n);
  return n;
}

FileDigest DurableWriter::close() {
  file_.close();
  return FileDigest{bytes_, hash_.finish_hex()};
}

FileDigest write_durable(const std::string& path, const std::string& bytes) {
  DurableWriter out(path);
  out.write(bytes.data(), bytes.size());
  return out.close();
}

FileDigest digest_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) XTRAIN_USAGE_ERROR("checkpoint: cannot open ", path, ": ", std::strerror(errno));
  Sha256 hash;
  int64_t total = 0;
  std::vector<char> buf(size_t(1) << 20);
  for (;;) {
    const ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      XTRAIN_USAGE_ERROR("checkpoint: cannot read ", path, ": ", std::strerror(err));
    }
    if (r == 0) break;
    hash.update(buf.data(), size_t(r));
    total += r;
  }
  ::close(fd);
  return FileDigest{total, hash.finish_hex()};
}

}  // namespace xtrain::checkpoint
