// IDX reader: one small byte-source over stdio or zlib, the header parsed into dims, the data read
// straight into the tensor's memory (no intermediate copy of a 47 MB file).
#include "xtrain/data/idx.h"

#include <ATen/ops/empty.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "xtrain/base/error.h"

namespace xtrain::data {
namespace {

// Reads a plain or gzipped file through one interface; errors name the file.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    FILE* probe = std::fopen(path.c_str(), "rb");
    XTRAIN_USAGE_CHECK(probe != nullptr, "data: cannot open ", path, ": ", std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    gzipped_ = std::fread(magic, 1, 2, probe) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (gzipped_) {
      std::fclose(probe);
      gz_ = gzopen(path.c_str(), "rb");
      XTRAIN_USAGE_CHECK(gz_ != nullptr, "data: cannot open ", path, " with zlib");
    } else {
      std::rewind(probe);
      file_ = probe;
    }
  }
  ~ByteSource() {
    if (file_) std::fclose(file_);
    if (gz_) gzclose(gz_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Reads up to n bytes; returns how many. A corrupt gzip stream is an error, a short read is not.
  size_t read(void* out, size_t n) {
    size_t done = 0;
    auto* p = static_cast<char*>(out);
    while (done < n) {
      const size_t chunk = std::min<size_t>(n - done, size_t(1) << 30);
      size_t got = 0;
      if (gzipped_) {
        const int r = gzread(gz_, p + done, unsigned(chunk));
        if (r < 0) {
          int code = 0;
          const char* msg = gzerror(gz_, &code);
          XTRAIN_USAGE_ERROR("data: ", path_, ": the gzip stream is corrupt or truncated (", msg, ")");
        }
        got = size_t(r);
      } else {
        got = std::fread(p + done, 1, chunk, file_);
      }
      if (got == 0) break;
      done += got;
    }
    return done;
  }

 private:
  std::string path_;
  bool gzipped_ = false;
  FILE* file_ = nullptr;
  gzFile gz_ = nullptr;
};

uint32_t big_endian_u32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

std::vector<int64_t> read_header(ByteSource& in, const std::string& path, uint32_t magic) {
  const char* what = magic == kIdxImagesMagic ? "images (u8 [N, H, W])" : "labels (u8 [N])";
  unsigned char head[4];
  const size_t got = in.read(head, 4);
  XTRAIN_USAGE_CHECK(got == 4, "data: ", path, ": truncated: ", got, " bytes, too short for an IDX header");
  const uint32_t found = big_endian_u32(head);
  XTRAIN_USAGE_CHECK(found == magic, "data: ", path, ": not an IDX ", what, " file: magic ", hex32(found),
                     ", expected ", hex32(magic));
  const int ndim = int(magic & 0xff);
  std::vector<unsigned char> raw(4 * ndim);
  const size_t got_dims = in.read(raw.data(), raw.size());
  XTRAIN_USAGE_CHECK(got_dims == raw.size(), "data: ", path, ": truncated inside the header (", ndim,
                     " sizes expected)");
  std::vector<int64_t> dims;
  for (int d = 0; d < ndim; ++d) dims.push_back(int64_t(big_endian_u32(&raw[4 * d])));
  for (int d = 1; d < ndim; ++d) {
    XTRAIN_USAGE_CHECK(dims[d] > 0, "data: ", path, ": wrong dims: size ", d, " is ", dims[d],
                       " in header ", c10::IntArrayRef(dims));
  }
  return dims;
}

}  // namespace

at::Tensor read_idx(const std::string& path, uint32_t magic) {
  TORCH_INTERNAL_ASSERT(magic == kIdxImagesMagic || magic == kIdxLabelsMagic);
  ByteSource in(path);
  const std::vector<int64_t> dims = read_header(in, path, magic);
  double bytes = 1;
  for (int64_t d : dims) bytes *= double(d);
  XTRAIN_USAGE_CHECK(bytes < double(int64_t(1) << 40), "data: ", path, ": wrong dims: header ",
                     c10::IntArrayRef(dims), " describes ", bytes, " bytes");
  at::Tensor out = at::empty(dims, at::kByte);
  const size_t want = size_t(out.numel());
  const size_t got = in.read(out.data_ptr<uint8_t>(), want);
  XTRAIN_USAGE_CHECK(got == want, "data: ", path, ": truncated: the header ", c10::IntArrayRef(dims),
                     " needs ", want, " bytes of data, the file has ", got);
  char extra = 0;
  XTRAIN_USAGE_CHECK(in.read(&extra, 1) == 0, "data: ", path, ": wrong dims: the file holds more data than the header ",
                     c10::IntArrayRef(dims), " describes");
  return out;
}

}  // namespace xtrain::data
