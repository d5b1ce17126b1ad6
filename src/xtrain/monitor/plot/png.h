// PNG encoding of an 8-bit RGB image (PNG spec, ISO/IEC 15948): signature, IHDR, one IDAT
// deflated by zlib, IEND; every row uses filter type 0 (None). Chunk CRCs are zlib's crc32.
// Design choice: the simplest valid PNG — plots are small and mostly flat colour, so filters
// would save little.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::monitor {

// `rgb` holds width*height*3 bytes, rows top to bottom. Returns the PNG file's bytes.
std::string encode_png_rgb(int width, int height, const std::vector<uint8_t>& rgb);

// Writes encode_png_rgb(...) to `path`; UsageError when the file cannot be written.
void write_png_rgb(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb);

}  // namespace xtrain::monitor
