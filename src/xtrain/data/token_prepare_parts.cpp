// The parts of prepare_tokens: chunk planning over mapped files, per-chunk tokenization (text
// files and JSON lines), the per-split shard sinks and the final manifest.
#include "xtrain/data/token_prepare_parts.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "xtrain/base/error.h"

namespace xtrain::data {
namespace fs = std::filesystem;

void check_prepare_options(const PrepareOptions& o) {
  XTRAIN_USAGE_CHECK(o.val_fraction > 0.0 && o.val_fraction < 1.0,
                     "data prepare: --val-fraction must be in (0, 1), got ", o.val_fraction);
  XTRAIN_USAGE_CHECK(o.shard_tokens > 0 && o.shard_tokens < (int64_t(1) << 31),
                     "data prepare: --shard-tokens must be in [1, 2^31) (llm.c's header holds an int32), got ",
                     o.shard_tokens);
  XTRAIN_USAGE_CHECK(!o.output.empty(), "data prepare: --output names the folder to write");
  XTRAIN_USAGE_CHECK(o.chunk_bytes >= 0, "data prepare: chunk size must be >= 0 (0: automatic)");
  const auto& types = tokenizer_types();
  XTRAIN_USAGE_CHECK(std::find(types.begin(), types.end(), o.tokenizer.type) != types.end(),
                     "data prepare: --tokenizer must be one of ", c10::Join(", ", types), ", got \"",
                     o.tokenizer.type, "\"");
}

Corpus plan_corpus(const std::vector<std::string>& files, int64_t chunk_bytes) {
  Corpus c;
  for (const auto& path : files) {
    if (fs::file_size(path) == 0) continue;
    const size_t f = c.files.size();
    c.files.push_back(std::make_shared<const MappedFile>(path));
    c.jsonl.push_back(fs::path(path).extension() == ".jsonl");
    const char* text = reinterpret_cast<const char*>(c.files.back()->data());
    const int64_t size = c.files.back()->size();
    int64_t line = 1;
    for (int64_t pos = 0; pos < size;) {
      int64_t end = std::min(pos + chunk_bytes, size);
      if (end < size) {
        const void* nl = std::memchr(text + end - 1, '\n', size_t(size - end + 1));
        end = nl ? int64_t(static_cast<const char*>(nl) - text) + 1 : size;
      }
      c.chunks.push_back({f, pos, end, pos == 0, line});
      if (c.jsonl[f]) line += std::count(text + pos, text + end, '\n');
      c.bytes += end - pos;
      pos = end;
    }
  }
  XTRAIN_USAGE_CHECK(!c.chunks.empty(), "data prepare: the ", files.size(), " input file(s) (", files.front(),
                     files.size() > 1 ? ", ..." : "", ") are empty: an empty corpus");
  return c;
}

namespace {

void append_document(std::vector<int32_t>& out, std::string_view text, const Tokenizer& tokenizer) {
  if (const auto eot = tokenizer.end_of_text()) out.push_back(*eot);
  const auto ids = tokenizer.encode(text);
  out.insert(out.end(), ids.begin(), ids.end());
}

}  // namespace

TokenizedChunk tokenize_chunk(const Corpus& corpus, const Chunk& chunk, const Tokenizer& tokenizer,
                              const std::string& text_field) {
  const MappedFile& file = *corpus.files[chunk.file];
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + chunk.begin,
                              size_t(chunk.end - chunk.begin));
  TokenizedChunk out;
  out.bytes = chunk.end - chunk.begin;
  if (!corpus.jsonl[chunk.file]) {
    if (chunk.first) {
      if (const auto eot = tokenizer.end_of_text()) out.tokens.push_back(*eot);
      out.documents = 1;
    }
    const auto ids = tokenizer.encode(text);
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    return out;
  }
  int64_t line_no = chunk.first_line;
  for (size_t pos = 0; pos < text.size(); ++line_no) {
    const size_t nl = text.find('\n', pos);
    const std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    XTRAIN_USAGE_CHECK(!j.is_discarded(), "data prepare: ", file.path(), ":", line_no, " is not a JSON object");
    XTRAIN_USAGE_CHECK(j.is_object() && j.contains(text_field) && j[text_field].is_string(), "data prepare: ",
                       file.path(), ":", line_no, " has no string field \"", text_field, "\" (--text-field)");
    append_document(out.tokens, j[text_field].get_ref<const std::string&>(), tokenizer);
    out.documents += 1;
  }
  return out;
}

std::unique_ptr<Tokenizer> build_tokenizer(const PrepareOptions& o, const Corpus& corpus) {
  const bool trains = (o.tokenizer.type == "bpe" || o.tokenizer.type == "unigram") && o.tokenizer.model_file.empty();
  if (!trains) return make_tokenizer(o.tokenizer);
  std::vector<fs::path> training;
  const fs::path extract = fs::path(o.output) / ".tokenizer_training.txt";
  std::ofstream out;
  for (const auto& chunk : corpus.chunks) {
    const MappedFile& file = *corpus.files[chunk.file];
    if (!corpus.jsonl[chunk.file]) {
      if (chunk.first) training.emplace_back(file.path());
      continue;
    }
    if (!out.is_open()) out.open(extract);
    // The extract holds the documents' text, one per line, as SentencePiece reads it.
    const std::string_view text(reinterpret_cast<const char*>(file.data()) + chunk.begin,
                                size_t(chunk.end - chunk.begin));
    for (size_t pos = 0; pos < text.size();) {
      const size_t nl = std::min(text.find('\n', pos), text.size());
      const auto j = nlohmann::json::parse(text.substr(pos, nl - pos), nullptr, false);
      if (j.is_object() && j.contains(o.text_field) && j[o.text_field].is_string()) {
        out << j[o.text_field].get_ref<const std::string&>() << '\n';
      }
      pos = nl + 1;
    }
  }
  if (out.is_open()) {
    out.close();
    training.push_back(extract);
  }
  auto tokenizer = make_tokenizer(o.tokenizer, training);
  fs::remove(extract);
  return tokenizer;
}

ShardSink::ShardSink(std::string dir, std::string split, bool u32, int64_t shard_tokens)
    : dir_(std::move(dir)), split_(std::move(split)), u32_(u32), shard_tokens_(shard_tokens) {}

void ShardSink::append(const int32_t* tokens, int64_t n) {
  while (n > 0) {
    if (!writer_) {
      char name[64];
      std::snprintf(name, sizeof name, "%s_%06zu.bin", split_.c_str(), done_.size());
      writer_ = std::make_unique<TokenShardWriter>(dir_ + "/" + name, u32_);
    }
    const int64_t take = std::min(n, shard_tokens_ - writer_->tokens());
    writer_->append(tokens, take);
    tokens += take, n -= take;
    if (writer_->tokens() == shard_tokens_) close();
  }
}

std::vector<ShardEntry> ShardSink::close() {
  if (writer_ && writer_->tokens() > 0) {
    const int64_t bytes = writer_->close();
    done_.push_back({fs::path(writer_->path()).filename().string(), writer_->tokens(), bytes});
  }
  writer_.reset();
  return done_;
}

PrepareResult finish_prepare(const PrepareOptions& o, const Tokenizer& tokenizer, ShardSink& train, ShardSink& val,
                             PrepareResult r) {
  TokenManifest m;
  m.tokenizer = tokenizer.type();
  m.vocab_size = tokenizer.vocab_size();
  m.end_of_text = tokenizer.end_of_text() ? *tokenizer.end_of_text() : -1;
  m.uint32_tokens = m.vocab_size > 65536;
  m.train = train.close();
  m.val = val.close();
  r.train_tokens = m.tokens(false);
  r.val_tokens = m.tokens(true);
  XTRAIN_USAGE_CHECK(r.train_tokens > 0, "data prepare: the inputs hold no text (", r.documents,
                     " documents, 0 tokens): an empty corpus");
  for (const auto* split : {&m.train, &m.val}) {
    for (const auto& s : *split) r.files.push_back(s.file);
  }
  write_token_manifest(o.output, m);
  tokenizer.save(o.output);
  r.vocab_size = m.vocab_size;
  r.tokenizer = m.tokenizer;
  return r;
}

}  // namespace xtrain::data
