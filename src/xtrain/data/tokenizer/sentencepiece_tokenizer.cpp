// SentencePiece BPE and unigram tokenizers over Debian's libsentencepiece. Trained for exact
// round-trips: identity normalization, whitespace kept as it is, no dummy prefix, and byte
// fallback (characters outside the vocabulary, newlines included, become <0xNN> byte pieces), so
// decode(encode(text)) == text and encode(a) + encode(b) decodes to a + b.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/data/tokenizer/backends.h"

namespace xtrain::data {
namespace fs = std::filesystem;
namespace {

constexpr const char* kModelFile = "sentencepiece.model";

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(std::string type, std::string serialized, const std::string& origin)
      : type_(std::move(type)), serialized_(std::move(serialized)) {
    auto status = sp_.LoadFromSerializedProto(serialized_);
    XTRAIN_USAGE_CHECK(status.ok(), "tokenizer: ", origin, " is not a SentencePiece model: ", status.ToString());
  }
  std::string type() const override { return type_; }
  int64_t vocab_size() const override { return sp_.GetPieceSize(); }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    auto status = sp_.Encode(absl::string_view(text.data(), text.size()), &ids);
    XTRAIN_USAGE_CHECK(status.ok(), "tokenizer: SentencePiece encode failed: ", status.ToString());
    return std::vector<int32_t>(ids.begin(), ids.end());
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    const int n = sp_.GetPieceSize();
    for (size_t i = 0; i < ids.size(); ++i) {
      XTRAIN_USAGE_CHECK(ids[i] >= 0 && ids[i] < n, "tokenizer: ", type_, " id ", ids[i], " at position ", i,
                         " is outside the vocabulary [0, ", n, ")");
    }
    std::string text;
    auto status = sp_.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    XTRAIN_USAGE_CHECK(status.ok(), "tokenizer: SentencePiece decode failed: ", status.ToString());
    return text;
  }
  std::optional<int32_t> end_of_text() const override {
    return sp_.eos_id() >= 0 ? std::optional<int32_t>(sp_.eos_id()) : std::nullopt;
  }
  void save(const fs::path& dir) const override {
    fs::create_directories(dir);
    write_file_atomic((dir / kModelFile).string(), serialized_);
    nlohmann::json j{{"type", type_}, {"vocab_size", vocab_size()}, {"model", kModelFile}};
    write_file_atomic((dir / kTokenizerFile).string(), j.dump(2));
  }

 private:
  std::string type_;
  std::string serialized_;
  sentencepiece::SentencePieceProcessor sp_;
};

// The training files' lines, one sentence each (SentencePiece trains on sentences, not files).
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<fs::path>& files) : files_(files) { advance(); }
  bool done() const override { return file_ >= files_.size(); }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void advance() {
    while (file_ < files_.size()) {
      if (!in_.is_open()) {
        in_.open(files_[file_]);
        XTRAIN_USAGE_CHECK(in_, "tokenizer: cannot read training text ", files_[file_].string());
      }
      while (std::getline(in_, line_)) {
        if (!line_.empty()) return;
      }
      in_.close();
      ++file_;
    }
  }
  const std::vector<fs::path>& files_;
  size_t file_ = 0;
  std::ifstream in_;
  std::string line_;
};

}  // namespace

std::unique_ptr<Tokenizer> train_sentencepiece(const std::string& type, int64_t vocab_size,
                                               const std::vector<fs::path>& files) {
  XTRAIN_USAGE_CHECK(vocab_size > 0, "tokenizer: a ", type, " tokenizer needs a vocabulary size (--vocab-size), got ",
                     vocab_size);
  for (const auto& f : files) XTRAIN_USAGE_CHECK(fs::exists(f), "tokenizer: training text ", f.string(), " does not exist");
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const std::unordered_map<std::string, std::string> args{
      {"model_type", type},
      {"vocab_size", std::to_string(vocab_size)},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"character_coverage", "0.9995"},
      {"input_sentence_size", "2000000"},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(threads)},
      {"minloglevel", "1"},
  };
  LineIterator lines(files);
  std::string serialized;
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &serialized);
  XTRAIN_USAGE_CHECK(status.ok(), "tokenizer: training the ", type, " tokenizer with vocabulary size ", vocab_size,
                     " failed: ", status.ToString(),
                     " (byte fallback needs 256 byte pieces plus 3 specials plus the text's characters: use a larger "
                     "--vocab-size; a unigram vocabulary also cannot exceed what the text supports)");
  return std::make_unique<SentencePieceTokenizer>(type, std::move(serialized), "the trained model");
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& type, const fs::path& model_file) {
  XTRAIN_USAGE_CHECK(fs::exists(model_file), "tokenizer: SentencePiece model ", model_file.string(),
                     " does not exist");
  return std::make_unique<SentencePieceTokenizer>(type, read_file(model_file.string()), model_file.string());
}

}  // namespace xtrain::data
