// SHA-256 (FIPS 180-4), for checkpoint checksums and tensor fingerprints. A plain portable
// implementation: checkpoint files are hashed once while written and once on load, so clarity
// wins over SIMD (~200 MB/s is far above what a checkpoint write needs here).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace xtrain {

// Incremental hashing: update() any number of times, then finish_hex() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(const std::string& bytes) { update(bytes.data(), bytes.size()); }
  // The digest as 64 lowercase hex characters. The object must not be updated afterwards.
  std::string finish_hex();

 private:
  void compress(const uint8_t* block);
  uint32_t state_[8];
  uint8_t block_[64];
  size_t block_len_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
};

std::string sha256_hex(const void* data, size_t n);
inline std::string sha256_hex(const std::string& bytes) { return sha256_hex(bytes.data(), bytes.size()); }

}  // namespace xtrain
