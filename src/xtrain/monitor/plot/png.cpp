#include "xtrain/monitor/plot/png.h"

#include <c10/util/Exception.h>
#include <zlib.h>

#include <cstdio>

#include "xtrain/base/error.h"

namespace xtrain::monitor {
namespace {

void put_u32_be(std::string& out, uint32_t v) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  out.append(b, 4);
}

// length | type | data | crc32(type + data)
void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_u32_be(out, static_cast<uint32_t>(data.size()));
  const size_t type_at = out.size();
  out.append(type, 4);
  out += data;
  const auto* p = reinterpret_cast<const Bytef*>(out.data() + type_at);
  put_u32_be(out, static_cast<uint32_t>(crc32(0L, p, static_cast<uInt>(4 + data.size()))));
}

}  // namespace

std::string encode_png_rgb(int width, int height, const std::vector<uint8_t>& rgb) {
  XTRAIN_USAGE_CHECK(width > 0 && height > 0 && rgb.size() == size_t(width) * height * 3,
                     "monitor: a PNG needs width*height*3 bytes, got ", rgb.size(), " for ", width, "x", height);
  std::string raw;  // each row: filter byte 0, then the row's RGB bytes
  raw.reserve(size_t(height) * (1 + size_t(width) * 3));
  for (int y = 0; y < height; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char*>(rgb.data()) + size_t(y) * width * 3, size_t(width) * 3);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(packed_size, '\0');
  const int rc = compress2(reinterpret_cast<Bytef*>(&packed[0]), &packed_size,
                           reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), 6);
  TORCH_CHECK(rc == Z_OK, "monitor: zlib compress2 failed with ", rc);
  packed.resize(packed_size);

  std::string ihdr;
  put_u32_be(ihdr, static_cast<uint32_t>(width));
  put_u32_be(ihdr, static_cast<uint32_t>(height));
  ihdr += std::string{8, 2, 0, 0, 0};  // bit depth 8, colour type 2 (RGB), deflate, filter 0, no interlace
  std::string out = "\x89PNG\r\n\x1a\n";
  put_chunk(out, "IHDR", ihdr);
  put_chunk(out, "IDAT", packed);
  put_chunk(out, "IEND", "");
  return out;
}

void write_png_rgb(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb) {
  const std::string bytes = encode_png_rgb(width, height, rgb);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  XTRAIN_USAGE_CHECK(f != nullptr, "monitor: cannot open ", path, " for writing");
  const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool ok = std::fclose(f) == 0 && n == bytes.size();
  XTRAIN_USAGE_CHECK(ok, "monitor: cannot write ", path, " (disk full?)");
}

}  // namespace xtrain::monitor
