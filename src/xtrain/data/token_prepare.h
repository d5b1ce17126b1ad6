// `xtrain data prepare`: text files, globs and JSONL turned into a folder of llm.c token shards
// (train_000000.bin …, val_000000.bin …), manifest.json and the tokenizer. Design choice: memory
// is bounded by a window of chunks (~4 MiB of text each) in flight, never by the corpus: threads
// tokenize chunks out of order, one writer appends them in order, and each chunk gives the last
// val_fraction of its tokens to the validation split (so validation samples the whole corpus).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "xtrain/data/tokenizer/tokenizer.h"

namespace xtrain::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files or glob patterns; *.jsonl are JSON lines
  std::string text_field = "text";  // JSONL: the field holding a document's text
  TokenizerSpec tokenizer;
  std::string output;               // the folder to write
  double val_fraction = 0.01;       // of each chunk's tokens, in [0, 1)
  int64_t shard_tokens = 100'000'000;  // tokens per shard file (llm.c's fineweb.py uses 10^8)
  int threads = 0;                  // 0: the cores this process may use
  int64_t chunk_bytes = 0;          // text per work item; 0: corpus / (8 x threads) in [64 KiB, 4 MiB]
};

struct PrepareProgress {
  int64_t chunks_done = 0, chunks_total = 0, bytes_done = 0, bytes_total = 0, tokens = 0;
  int64_t chunk_tokens = 0;  // the tokens of the chunk just written
};

struct PrepareResult {
  int64_t train_tokens = 0, val_tokens = 0, documents = 0;
  std::vector<std::string> files;  // shards written, in order
  int64_t vocab_size = 0;
  std::string tokenizer;
};

// The inputs as files: patterns expanded (sorted), plain names checked. UsageError naming a
// missing file or a pattern that matches nothing.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs);

// `progress` is called once with chunks_done = 0 when tokenizing starts (after any tokenizer
// training), then after each chunk is written.
PrepareResult prepare_tokens(const PrepareOptions& options,
                             const std::function<void(const PrepareProgress&)>& progress = {});

}  // namespace xtrain::data
