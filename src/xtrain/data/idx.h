// IDX files (the MNIST format: big-endian magic 0x0000 08 <ndim>, ndim u32 sizes, then u8 data),
// plain or gzipped (detected by the gzip magic 1f 8b, not by the name). Our own reader because
// torch::data::datasets::MNIST hard-codes 60000/10000 images; every malformation is a UsageError
// naming the file and the problem.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace xtrain::data {

constexpr uint32_t kIdxImagesMagic = 0x00000803;  // u8 [N, H, W]
constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // u8 [N]

// The whole file as a uint8 tensor shaped by its header; `magic` must match exactly.
at::Tensor read_idx(const std::string& path, uint32_t magic);
inline at::Tensor read_idx_images(const std::string& path) { return read_idx(path, kIdxImagesMagic); }
inline at::Tensor read_idx_labels(const std::string& path) { return read_idx(path, kIdxLabelsMagic); }

}  // namespace xtrain::data
