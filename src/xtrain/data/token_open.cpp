// The `tokens` dataset's opener: a folder with manifest.json (xtrain data prepare), else llm.c's
// shards (*train*.bin / *val*.bin, header checked), else nanoGPT's train.bin / val.bin (raw
// uint16). Shards without a manifest take their vocabulary from xtrain.data.args.vocab_size or
// the tokenizer their writer used: GPT-2 (50257) for uint16 files, Llama 3 (128256) for uint32.
#include <algorithm>
#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/data/token_dataset.h"
#include "xtrain/data/token_manifest.h"

namespace xtrain::data {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kGpt2Vocab = 50257, kLlama3Vocab = 128256;

using Shards = std::vector<std::shared_ptr<const TokenShard>>;

Shards open_files(const std::vector<std::string>& files, ShardFormat format) {
  Shards out;
  for (const auto& f : files) out.push_back(std::make_shared<const TokenShard>(f, format));
  return out;
}

// Shard files of one split named like llm.c's scripts name them (fineweb_train_000001.bin).
std::vector<std::string> llmc_files(const fs::path& dir, const std::string& split) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && e.path().extension() == ".bin" && name.find(split) != std::string::npos) {
      out.push_back(e.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string arg_format(const DataOptions& o) { return o.args.value("format", std::string("auto")); }

Splits make_splits(const Shards& train, const Shards& val, int64_t vocab, int64_t seq_len) {
  return {std::make_shared<TokenDataset>(train, vocab, seq_len, "train"),
          std::make_shared<TokenDataset>(val, vocab, seq_len, "val")};
}

Splits open_manifest(const fs::path& dir, int64_t seq_len) {
  const TokenManifest m = read_token_manifest(dir.string());
  auto open_split = [&](const std::vector<ShardEntry>& entries) {
    Shards out;
    for (const auto& e : entries) {
      auto shard = std::make_shared<const TokenShard>((dir / e.file).string(), ShardFormat::kLlmc);
      XTRAIN_USAGE_CHECK(shard->size() == e.tokens, "data: ", shard->path(), " holds ", shard->size(),
                         " tokens but ", (dir / "manifest.json").string(), " lists ", e.tokens,
                         " (the folder was changed after xtrain data prepare wrote it)");
      out.push_back(std::move(shard));
    }
    return out;
  };
  return make_splits(open_split(m.train), open_split(m.val), m.vocab_size, seq_len);
}

}  // namespace

void validate_token_options(const DataOptions& o) {
  XTRAIN_USAGE_CHECK(o.args.is_object(), "data: xtrain.data.args must be an object for type tokens");
  for (const auto& [key, value] : o.args.items()) {
    XTRAIN_USAGE_CHECK(key == "format" || key == "vocab_size" || key == "tokenizer", "data: xtrain.data.args.", key,
                       " is not a setting of the tokens dataset (it reads format, vocab_size and tokenizer)");
  }
  const std::string format = arg_format(o);
  XTRAIN_USAGE_CHECK(format == "auto" || format == "llmc" || format == "nanogpt",
                     "data: xtrain.data.args.format must be auto, llmc or nanogpt, got \"", format, "\"");
  XTRAIN_USAGE_CHECK(o.args.value("vocab_size", int64_t(0)) >= 0, "data: xtrain.data.args.vocab_size must be >= 0");
}

Splits open_token_dataset(const DataOptions& o, int64_t seq_len, const std::string&) {
  validate_token_options(o);
  const fs::path dir = o.path;
  XTRAIN_USAGE_CHECK(!o.path.empty() && o.path != "mobydick" && fs::is_directory(dir), "data: xtrain.data.path \"",
                     o.path, "\" is not a folder: the tokens dataset reads a folder written by `xtrain data prepare` ",
                     "(or llm.c / nanoGPT .bin shards)");
  const std::string format = arg_format(o);
  if (format == "auto" && fs::exists(dir / "manifest.json")) return open_manifest(dir, seq_len);
  const bool nanogpt = format == "nanogpt" || (format == "auto" && fs::exists(dir / "train.bin") &&
                                                fs::exists(dir / "val.bin"));
  Shards train, val;
  if (nanogpt) {
    train = open_files({(dir / "train.bin").string()}, ShardFormat::kRawU16);
    val = open_files({(dir / "val.bin").string()}, ShardFormat::kRawU16);
  } else {
    train = open_files(llmc_files(dir, "train"), ShardFormat::kLlmc);
    val = open_files(llmc_files(dir, "val"), ShardFormat::kLlmc);
    XTRAIN_USAGE_CHECK(!train.empty() && !val.empty(), "data: ", dir.string(), " has no manifest.json and no ",
                       train.empty() ? "*train*.bin" : "*val*.bin", " shard: run xtrain data prepare --output ",
                       dir.string());
  }
  int64_t vocab = o.args.value("vocab_size", int64_t(0));
  if (vocab == 0) vocab = !train.empty() && train.front()->uint32_tokens() ? kLlama3Vocab : kGpt2Vocab;
  return make_splits(train, val, vocab, seq_len);
}

}  // namespace xtrain::data
