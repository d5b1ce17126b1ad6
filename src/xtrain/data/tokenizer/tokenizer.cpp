// make_tokenizer / load_tokenizer: the dispatch on the type, tokenizer.json, and the byte tokenizer
// (one id per byte, 256 ids, no end-of-text id: xtrain's original text model input).
#include "xtrain/data/tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include "xtrain/base/env.h"
#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/data/tokenizer/backends.h"

namespace xtrain::data {
namespace fs = std::filesystem;
namespace {

class ByteTokenizer : public Tokenizer {
 public:
  std::string type() const override { return "byte"; }
  int64_t vocab_size() const override { return 256; }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      XTRAIN_USAGE_CHECK(ids[i] >= 0 && ids[i] < 256, "tokenizer: byte id ", ids[i], " at position ", i,
                         " is outside [0, 256)");
      out[i] = static_cast<char>(ids[i]);
    }
    return out;
  }
  std::optional<int32_t> end_of_text() const override { return std::nullopt; }
  void save(const fs::path& dir) const override {
    fs::create_directories(dir);
    write_file_atomic((dir / kTokenizerFile).string(), nlohmann::json{{"type", "byte"}, {"vocab_size", 256}}.dump(2));
  }
};

bool is_sentencepiece(const std::string& type) { return type == "bpe" || type == "unigram"; }

void check_type(const std::string& type, const std::string& where) {
  const auto& known = tokenizer_types();
  XTRAIN_USAGE_CHECK(std::find(known.begin(), known.end(), type) != known.end(), "tokenizer: unknown type \"",
                     type, "\"", where, "; expected one of byte, bpe, unigram, gpt2");
}

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

const std::vector<std::string>& tokenizer_types() {
  static const std::vector<std::string> types{"byte", "bpe", "unigram", "gpt2"};
  return types;
}

fs::path default_gpt2_dir() {
  if (auto dir = env::get("XTRAIN_DATA_DIR")) return fs::path(*dir) / "gpt2";
  return fs::path(env::get_or("HOME", ".")) / ".cache/xtrain/data/gpt2";
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSpec& spec, const std::vector<fs::path>& training_text) {
  check_type(spec.type, "");
  if (spec.type == "byte") return make_byte_tokenizer();
  if (spec.type == "gpt2") return load_gpt2(spec.gpt2_dir.empty() ? default_gpt2_dir() : spec.gpt2_dir);
  if (!spec.model_file.empty()) return load_sentencepiece(spec.type, spec.model_file);
  XTRAIN_USAGE_CHECK(!training_text.empty(), "tokenizer: a ", spec.type,
                     " tokenizer needs training text files or a SentencePiece .model file (--tokenizer-model)");
  return train_sentencepiece(spec.type, spec.vocab_size, training_text);
}

std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& dir) {
  const fs::path file = dir / kTokenizerFile;
  XTRAIN_USAGE_CHECK(fs::exists(file), "tokenizer: no ", file.string(),
                     " (a tokenizer folder holds tokenizer.json, written by Tokenizer::save)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(file.string()));
  } catch (const nlohmann::json::exception& e) {
    XTRAIN_USAGE_ERROR("tokenizer: ", file.string(), " is not valid JSON: ", e.what());
  }
  XTRAIN_USAGE_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(), "tokenizer: ", file.string(),
                     " has no \"type\" string");
  const std::string type = j["type"].get<std::string>();
  check_type(type, " in " + file.string());
  if (type == "byte") return make_byte_tokenizer();
  if (type == "gpt2") return load_gpt2(dir);
  XTRAIN_USAGE_CHECK(j.contains("model") && j["model"].is_string(), "tokenizer: ", file.string(),
                     " has no \"model\" file name for its SentencePiece model");
  return load_sentencepiece(type, dir / j["model"].get<std::string>());
}

}  // namespace xtrain::data
