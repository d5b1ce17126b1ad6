// Tokenizers: text <-> token ids. One interface over the byte tokenizer (xtrain's original: one id
// per byte), SentencePiece BPE and unigram (libsentencepiece), and GPT-2's byte-level BPE read from
// its standard encoder.json + vocab.bpe. A tokenizer saves itself into a folder (tokenizer.json
// plus its model files), so a run directory carries the tokenizer its model was trained with.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace xtrain::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string type() const = 0;  // "byte", "bpe", "unigram", "gpt2"
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids outside [0, vocab_size) are a UsageError naming the id.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual std::optional<int32_t> end_of_text() const = 0;  // GPT-2: 50256; byte: none
  // Writes everything needed to load it again into `dir` (tokenizer.json + model files).
  virtual void save(const std::filesystem::path& dir) const = 0;
};

struct TokenizerSpec {
  std::string type = "byte";         // byte | bpe | unigram | gpt2
  int64_t vocab_size = 0;            // bpe/unigram training
  std::filesystem::path model_file;  // SentencePiece .model to load instead of training
  std::filesystem::path gpt2_dir;    // encoder.json + vocab.bpe (default: the fetched npm copy)
};

// The tokenizer types make_tokenizer knows, for messages and CLI checks.
const std::vector<std::string>& tokenizer_types();

// Builds (trains, for bpe/unigram without model_file, on `training_text` files) a tokenizer.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSpec& spec,
                                          const std::vector<std::filesystem::path>& training_text = {});
// Reads what save wrote; UsageError naming the folder when tokenizer.json is missing or bad.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& dir);

// $XTRAIN_DATA_DIR/gpt2 (or ~/.cache/xtrain/data/gpt2): where scripts/fetch-data puts GPT-2's files.
std::filesystem::path default_gpt2_dir();

}  // namespace xtrain::data
