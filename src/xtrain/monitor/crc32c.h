// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord framing uses it, with
// TensorFlow's mask ((crc >> 15 | crc << 17) + 0xa282ead8). Table-driven, one byte at a time:
// event files are small, so the SSE4.2 instruction would buy nothing measurable.
#pragma once
#include <cstddef>
#include <cstdint>

namespace xtrain::monitor {

uint32_t crc32c(const void* data, size_t size);
uint32_t masked_crc32c(const void* data, size_t size);

}  // namespace xtrain::monitor
