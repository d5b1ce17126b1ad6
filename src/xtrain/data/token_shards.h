// Token shards on disk in llm.c's format (dev/data/data_common.py write_datafile): a header of 256
// little-endian int32 — [0] magic, [1] version, [2] token count — then the tokens. GPT-2-sized
// vocabularies: magic 20240520, version 1, uint16 tokens; larger ones: llm.c's llama-3 pair,
// magic 20240801, version 7, uint32 tokens. nanoGPT's train.bin / val.bin (raw uint16, no header)
// are read as they are. Readers map the file (MappedFile): nothing is copied into the heap.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "xtrain/data/mapped_file.h"

namespace xtrain::data {

constexpr int32_t kShardMagicU16 = 20240520, kShardVersionU16 = 1;
constexpr int32_t kShardMagicU32 = 20240801, kShardVersionU32 = 7;
constexpr int64_t kShardHeaderInts = 256, kShardHeaderBytes = kShardHeaderInts * 4;

// Writes one shard: a temp file beside `path`, renamed over it by close(). Tokens must be below
// 2^16 for uint16 shards (checked per token; the error names the file).
class TokenShardWriter {
 public:
  TokenShardWriter(const std::string& path, bool uint32_tokens);
  ~TokenShardWriter();  // without close(): the temp file is removed
  TokenShardWriter(const TokenShardWriter&) = delete;
  TokenShardWriter& operator=(const TokenShardWriter&) = delete;
  void append(const int32_t* tokens, int64_t n);
  // Fills in the header's token count, fsyncs and renames; returns the file's size in bytes.
  int64_t close();
  int64_t tokens() const { return count_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_;
  bool u32_;
  int fd_ = -1;
  int64_t count_ = 0;
};

// The on-disk layout of a shard file.
enum class ShardFormat { kLlmc, kRawU16 };

// One read-only shard. UsageError naming the file for a missing or empty file, a wrong magic or
// version, a negative count, or a size that does not match the header's count (truncated tokens).
class TokenShard {
 public:
  TokenShard(const std::string& path, ShardFormat format);
  int64_t size() const { return count_; }
  bool uint32_tokens() const { return u32_; }
  const std::string& path() const { return file_.path(); }
  uint32_t operator[](int64_t i) const {
    return u32_ ? reinterpret_cast<const uint32_t*>(tokens_)[i] : reinterpret_cast<const uint16_t*>(tokens_)[i];
  }

 private:
  MappedFile file_;
  const uint8_t* tokens_ = nullptr;
  int64_t count_ = 0;
  bool u32_ = false;
};

}  // namespace xtrain::data
