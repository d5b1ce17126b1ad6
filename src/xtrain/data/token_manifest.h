// manifest.json of a token-shard folder (`xtrain data prepare` writes it, the `tokens` dataset
// reads it): the tokenizer, the vocabulary, and each split's shard files with their token counts
// and sizes, so a missing or truncated shard is found before training starts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::data {

struct ShardEntry {
  std::string file;  // relative to the folder
  int64_t tokens = 0;
  int64_t bytes = 0;
};

struct TokenManifest {
  std::string tokenizer;  // byte | bpe | unigram | gpt2
  int64_t vocab_size = 0;
  int64_t end_of_text = -1;  // -1: the tokenizer has none
  bool uint32_tokens = false;
  std::vector<ShardEntry> train, val;
  int64_t tokens(bool val_split) const;
};

// Writes <dir>/manifest.json atomically.
void write_token_manifest(const std::string& dir, const TokenManifest& m);
// Reads <dir>/manifest.json; UsageError naming the file and the field when it is malformed.
TokenManifest read_token_manifest(const std::string& dir);

}  // namespace xtrain::data
