// The pieces of prepare_tokens (token_prepare.h): the corpus as line-aligned chunks of mapped
// files, one chunk's tokenization, the shard sinks of a split, and the manifest at the end.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/data/mapped_file.h"
#include "xtrain/data/token_manifest.h"
#include "xtrain/data/token_prepare.h"
#include "xtrain/data/token_shards.h"

namespace xtrain::data {

struct Chunk {
  size_t file = 0;
  int64_t begin = 0, end = 0;  // bytes of the file, ending after a newline (or at the file's end)
  bool first = false;          // the file's first chunk: a text file's document starts here
  int64_t first_line = 1;      // JSONL: the line number of `begin`, for messages
};

struct Corpus {
  std::vector<std::shared_ptr<const MappedFile>> files;  // empty inputs are left out
  std::vector<bool> jsonl;
  std::vector<Chunk> chunks;
  int64_t bytes = 0;
};

struct TokenizedChunk {
  std::vector<int32_t> tokens;
  int64_t documents = 0, bytes = 0;
};

// UsageError naming the option for a bad val_fraction, shard_tokens, output or tokenizer type.
void check_prepare_options(const PrepareOptions& o);
// Maps the files and cuts them into chunks of about `chunk_bytes`; UsageError when all are empty.
Corpus plan_corpus(const std::vector<std::string>& files, int64_t chunk_bytes);
// Text files: one document per file. JSONL: one per line, its `text_field` (UsageError naming the
// file and line when a line is not JSON or lacks the field). Each document starts with the
// tokenizer's end-of-text when it has one (as llm.c's fineweb.py does).
TokenizedChunk tokenize_chunk(const Corpus& corpus, const Chunk& chunk, const Tokenizer& tokenizer,
                              const std::string& text_field);
// make_tokenizer on the inputs; bpe/unigram training on JSONL reads a temporary text extract.
std::unique_ptr<Tokenizer> build_tokenizer(const PrepareOptions& o, const Corpus& corpus);

// One split's shard files, <dir>/<split>_000000.bin …, a new file every `shard_tokens` tokens.
class ShardSink {
 public:
  ShardSink(std::string dir, std::string split, bool u32, int64_t shard_tokens);
  void append(const int32_t* tokens, int64_t n);
  std::vector<ShardEntry> close();

 private:
  std::string dir_, split_;
  bool u32_;
  int64_t shard_tokens_;
  std::unique_ptr<TokenShardWriter> writer_;
  std::vector<ShardEntry> done_;
};

// Closes the sinks, writes manifest.json and the tokenizer; UsageError for an empty corpus.
PrepareResult finish_prepare(const PrepareOptions& o, const Tokenizer& tokenizer, ShardSink& train, ShardSink& val,
                             PrepareResult r);

}  // namespace xtrain::data
