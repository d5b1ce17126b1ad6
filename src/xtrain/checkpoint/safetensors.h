// Hugging Face's safetensors format: an 8-byte little-endian header length N, N bytes of JSON ({name: {"dtype",
// "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, padded with spaces), then the tensors' bytes
// (offsets relative to the end of the header; no holes, no overlaps). Dtypes F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL.
// Little-endian hosts only.
#pragma once
#include <map>
#include <string>

#include "xtrain/checkpoint/durable_file.h"
#include "xtrain/checkpoint/store.h"

namespace xtrain::checkpoint {

using SafetensorsMetadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  NamedTensors tensors;  // in data-offset order, on the CPU, each owning its memory
  SafetensorsMetadata metadata;
};

// Reads through mmap. A UsageError naming the file for: a file shorter than its header says, a header that is not a
// JSON object, an unknown dtype, a shape whose byte size differs from its offsets, offsets out of the data range,
// overlapping or leaving a hole.
SafetensorsFile read_safetensors(const std::string& path);
// Tensors in the given order (names unique; dense tensors of a listed dtype); the header is padded to a multiple of 8
// bytes so every tensor of the file starts 8-aligned when sizes allow. Written through a DurableWriter: fsynced, size
// and SHA-256 returned.
FileDigest write_safetensors(const std::string& path, const NamedTensors& tensors,
                             const SafetensorsMetadata& metadata = {});

}  // namespace xtrain::checkpoint
