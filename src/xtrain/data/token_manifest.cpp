// manifest.json as plain nlohmann JSON: every field named in the error when missing or mistyped.
#include "xtrain/data/token_manifest.h"

#include <nlohmann/json.hpp>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"

namespace xtrain::data {
namespace {

nlohmann::json split_json(const std::vector<ShardEntry>& shards) {
  nlohmann::json j = {{"tokens", 0}, {"shards", nlohmann::json::array()}};
  int64_t total = 0;
  for (const auto& s : shards) {
    j["shards"].push_back({{"file", s.file}, {"tokens", s.tokens}, {"bytes", s.bytes}});
    total += s.tokens;
  }
  j["tokens"] = total;
  return j;
}

std::vector<ShardEntry> split_entries(const nlohmann::json& j, const std::string& name) {
  std::vector<ShardEntry> out;
  for (const auto& s : j.at(name).at("shards")) {
    out.push_back({s.at("file").get<std::string>(), s.at("tokens").get<int64_t>(), s.at("bytes").get<int64_t>()});
  }
  return out;
}

}  // namespace

int64_t TokenManifest::tokens(bool val_split) const {
  int64_t n = 0;
  for (const auto& s : val_split ? val : train) n += s.tokens;
  return n;
}

void write_token_manifest(const std::string& dir, const TokenManifest& m) {
  nlohmann::json j;
  j["format"] = "llm.c token shards";
  j["tokenizer"] = {{"type", m.tokenizer}, {"vocab_size", m.vocab_size}};
  j["tokenizer"]["end_of_text"] = m.end_of_text >= 0 ? nlohmann::json(m.end_of_text) : nlohmann::json(nullptr);
  j["vocab_size"] = m.vocab_size;
  j["token_bytes"] = m.uint32_tokens ? 4 : 2;
  j["train"] = split_json(m.train);
  j["val"] = split_json(m.val);
  write_file_atomic(dir + "/manifest.json", j.dump(2) + "\n");
}

TokenManifest read_token_manifest(const std::string& dir) {
  const std::string path = dir + "/manifest.json";
  const std::string text = read_file(path);
  try {
    const auto j = nlohmann::json::parse(text);
    TokenManifest m;
    m.tokenizer = j.at("tokenizer").at("type").get<std::string>();
    m.vocab_size = j.at("vocab_size").get<int64_t>();
    const auto& eot = j.at("tokenizer").value("end_of_text", nlohmann::json(nullptr));
    m.end_of_text = eot.is_null() ? -1 : eot.get<int64_t>();
    m.uint32_tokens = j.value("token_bytes", 2) == 4;
    m.train = split_entries(j, "train");
    m.val = split_entries(j, "val");
    XTRAIN_USAGE_CHECK(m.vocab_size > 0, "data: ", path, ": vocab_size must be > 0, got ", m.vocab_size);
    return m;
  } catch (const nlohmann::json::exception& e) {
    XTRAIN_USAGE_ERROR("data: ", path, " is not a token-shard manifest: ", e.what(),
                       " (rewrite it with xtrain data prepare)");
  }
}

}  // namespace xtrain::data
