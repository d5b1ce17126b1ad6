// Token shards: the writer streams tokens into a temp file and fills in the header's count last;
// the reader checks the header against the file size before any token is read.
#include "xtrain/data/token_shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"

namespace xtrain::data {
namespace {

void write_all(int fd, const void* data, size_t n, int64_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    XTRAIN_USAGE_CHECK(w > 0, "data: cannot write ", path, ": ", std::strerror(errno));
    p += w, n -= size_t(w), offset += w;
  }
}

std::vector<int32_t> header_of(bool u32, int64_t count) {
  std::vector<int32_t> h(kShardHeaderInts, 0);
  h[0] = u32 ? kShardMagicU32 : kShardMagicU16;
  h[1] = u32 ? kShardVersionU32 : kShardVersionU16;
  h[2] = int32_t(count);
  return h;
}

}  // namespace

TokenShardWriter::TokenShardWriter(const std::string& path, bool uint32_tokens)
    : path_(path), tmp_(parent_dir(path) + "/." + path.substr(path.find_last_of('/') + 1) + ".tmp"),
      u32_(uint32_tokens) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  XTRAIN_USAGE_CHECK(fd_ >= 0, "data: cannot create ", tmp_, ": ", std::strerror(errno));
  const auto h = header_of(u32_, 0);
  write_all(fd_, h.data(), h.size() * 4, 0, tmp_);
}

TokenShardWriter::~TokenShardWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void TokenShardWriter::append(const int32_t* tokens, int64_t n) {
  TORCH_CHECK(fd_ >= 0, "data: ", path_, " is already closed");
  const int64_t width = u32_ ? 4 : 2, limit = u32_ ? (int64_t(1) << 32) : (int64_t(1) << 16);
  std::vector<uint8_t> buf(size_t(n * width));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = tokens[i];
    XTRAIN_USAGE_CHECK(0 <= t && t < limit, "data: token ", t, " does not fit a ", u32_ ? "uint32" : "uint16",
                       " shard (", path_, ")");
    if (u32_) {
      const uint32_t v = uint32_t(t);
      std::memcpy(&buf[size_t(i * 4)], &v, 4);
    } else {
      const uint16_t v = uint16_t(t);
      std::memcpy(&buf[size_t(i * 2)], &v, 2);
    }
  }
  write_all(fd_, buf.data(), buf.size(), kShardHeaderBytes + count_ * width, tmp_);
  count_ += n;
  // llm.c's header holds the count in an int32 (its writer asserts the same bound).
  XTRAIN_USAGE_CHECK(count_ < (int64_t(1) << 31), "data: ", path_, " would hold ", count_,
                     " tokens; llm.c's header allows fewer than 2^31 (use a smaller --shard-tokens)");
}

int64_t TokenShardWriter::close() {
  TORCH_CHECK(fd_ >= 0, "data: ", path_, " is already closed");
  const auto h = header_of(u32_, count_);
  write_all(fd_, h.data(), h.size() * 4, 0, tmp_);
  XTRAIN_USAGE_CHECK(::fsync(fd_) == 0, "data: cannot fsync ", tmp_, ": ", std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  XTRAIN_USAGE_CHECK(::rename(tmp_.c_str(), path_.c_str()) == 0, "data: cannot rename ", tmp_, " to ", path_, ": ",
                     std::strerror(errno));
  return kShardHeaderBytes + count_ * (u32_ ? 4 : 2);
}

TokenShard::TokenShard(const std::string& path, ShardFormat format) : file_(path) {
  const int64_t bytes = file_.size();
  // Windows are read at random offsets: without this hint each page fault reads ahead ~128 KiB for
  // a window of a few hundred bytes (measured here: 640 random windows of a 1.5 GB shard took 1.7 s
  // with readahead, 0.03 s without). Only advice: a kernel that ignores it is still correct.
  ::madvise(const_cast<uint8_t*>(file_.data()), size_t(bytes), MADV_RANDOM);
  if (format == ShardFormat::kRawU16) {
    XTRAIN_USAGE_CHECK(bytes % 2 == 0, "data: ", path, " has ", bytes,
                       " bytes, an odd number: not a raw uint16 token file (nanoGPT's train.bin / val.bin)");
    tokens_ = file_.data();
    count_ = bytes / 2;
    return;
  }
  XTRAIN_USAGE_CHECK(bytes >= kShardHeaderBytes, "data: ", path, " has ", bytes, " bytes, shorter than llm.c's ",
                     kShardHeaderBytes, "-byte shard header (a truncated or foreign file)");
  int32_t h[3];
  std::memcpy(h, file_.data(), sizeof h);
  if (h[0] == kShardMagicU16 && h[1] == kShardVersionU16) {
    u32_ = false;
  } else if (h[0] == kShardMagicU32 && h[1] == kShardVersionU32) {
    u32_ = true;
  } else {
    XTRAIN_USAGE_ERROR("data: ", path, " is not an llm.c token shard: header magic ", h[0], " version ", h[1],
                       " (expected ", kShardMagicU16, "/", kShardVersionU16, " for uint16 tokens or ", kShardMagicU32,
                       "/", kShardVersionU32, " for uint32; nanoGPT's raw files must be named train.bin / val.bin ",
                       "or read with xtrain.data.args.format=nanogpt)");
  }
  count_ = h[2];
  XTRAIN_USAGE_CHECK(count_ >= 0, "data: ", path, ": the header's token count is negative (", count_, ")");
  const int64_t expected = kShardHeaderBytes + count_ * (u32_ ? 4 : 2);
  XTRAIN_USAGE_CHECK(bytes >= expected, "data: ", path, " is truncated: its header announces ", count_,
                     " tokens (", expected, " bytes) but the file has ", bytes, " bytes");
  XTRAIN_USAGE_CHECK(bytes == expected, "data: ", path, " has ", bytes - expected,
                     " bytes after the ", count_, " tokens its header announces (", expected, " bytes expected)");
  tokens_ = file_.data() + kShardHeaderBytes;
}

}  // namespace xtrain::data
