// Which tokenizer a run uses, and its copy in the run directory (see run_tokenizer.h).
#include "xtrain/run/run_tokenizer.h"

#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/data/token_manifest.h"

namespace xtrain {
namespace fs = std::filesystem;

namespace {
constexpr const char* kRunTokenizerDir = "tokenizer";

std::unique_ptr<data::Tokenizer> named_tokenizer(const std::string& name) {
  if (fs::is_directory(name)) return data::load_tokenizer(name);
  XTRAIN_USAGE_CHECK(name == "byte" || name == "gpt2", "run: xtrain.data.args.tokenizer \"", name,
                     "\" is not byte, gpt2 or a folder holding a saved tokenizer.json");
  data::TokenizerSpec spec;
  spec.type = name;
  return data::make_tokenizer(spec);
}
}  // namespace

std::unique_ptr<data::Tokenizer> data_tokenizer(const data::DataOptions& data) {
  if (data.args.is_object() && data.args.contains("tokenizer") && data.args["tokenizer"].is_string()) {
    return named_tokenizer(data.args["tokenizer"].get<std::string>());
  }
  const fs::path folder = data.path;
  if (!data.path.empty() && fs::is_directory(folder)) {
    if (fs::exists(folder / "tokenizer.json")) return data::load_tokenizer(folder);
    if (fs::exists(folder / "manifest.json")) {
      const std::string type = data::read_token_manifest(folder.string()).tokenizer;
      if (type == "byte" || type == "gpt2") return named_tokenizer(type);
      return nullptr;  // bpe/unigram shards without their model: nothing to decode with
    }
  }
  // The built-in text datasets read bytes unless args.tokenizer says otherwise.
  if (data.type == "text" || data.type == "text_classify") return data::make_tokenizer(data::TokenizerSpec{});
  return nullptr;
}

void save_run_tokenizer(const data::DataOptions& data, const std::string& run_dir) {
  if (auto tokenizer = data_tokenizer(data)) tokenizer->save(fs::path(run_dir) / kRunTokenizerDir);
}

std::unique_ptr<data::Tokenizer> load_run_tokenizer(const std::string& run_dir, const config::Config& config,
                                                    int64_t vocab) {
  const fs::path saved = fs::path(run_dir) / kRunTokenizerDir;
  std::unique_ptr<data::Tokenizer> tokenizer;
  if (fs::exists(saved / "tokenizer.json")) tokenizer = data::load_tokenizer(saved);
  if (!tokenizer) tokenizer = data_tokenizer(config.data);
  if (!tokenizer) tokenizer = data::make_tokenizer(data::TokenizerSpec{});
  XTRAIN_USAGE_CHECK(vocab <= 0 || tokenizer->vocab_size() <= vocab, "run: ", run_dir, "'s tokenizer (",
                     tokenizer->type(), ") has ", tokenizer->vocab_size(), " ids but the model's vocabulary is ",
                     vocab, " (xtrain.model.vocab): the run was trained on other data");
  return tokenizer;
}

}  // namespace xtrain
