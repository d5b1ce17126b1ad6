// export_safetensors.h: the run's tensors, renamed for the layout, written by checkpoint/safetensors.h; and
// the run's tokenizer beside an exported file (both exports), staged and compared before it replaces nothing.
#include "xtrain/cli/export_safetensors.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <map>

#include "xtrain/base/error.h"
#include "xtrain/base/file_io.h"
#include "xtrain/checkpoint/safetensors.h"
#include "xtrain/config/config.h"
#include "xtrain/models/hf_gpt2.h"
#include "xtrain/run/run_tokenizer.h"
#include "xtrain/run/train.h"

namespace xtrain::cli {
namespace fs = std::filesystem;

namespace {

// Every file of a folder, by name (one level: what Tokenizer::save writes).
std::map<std::string, std::string> folder_files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) out[e.path().filename().string()] = read_file(e.path().string());
  }
  return out;
}

}  // namespace

void export_run_tokenizer(const std::string& run_dir, const config::Config& config, const std::string& out) {
  const fs::path saved = fs::path(run_dir) / "tokenizer";
  std::unique_ptr<data::Tokenizer> tokenizer;
  std::string source = saved.string();
  try {
    if (fs::exists(saved / "tokenizer.json")) {
      tokenizer = data::load_tokenizer(saved);
    } else {
      tokenizer = data_tokenizer(config.data);  // a run from before runs kept their tokenizer
      source = "the run's data config (" + run_dir + " has no tokenizer/)";
    }
  } catch (const UsageError& e) {
    std::cerr << "export: warning: no tokenizer copied: " << e.what() << std::endl;
    return;
  }
  if (!tokenizer) return;  // the model reads no text
  const fs::path dest = fs::absolute(out).parent_path() / "tokenizer";
  const fs::path staged = fs::absolute(out).parent_path() / ".tokenizer.export-tmp";
  fs::remove_all(staged);
  tokenizer->save(staged);
  if (fs::exists(dest)) {
    const bool same = fs::is_directory(dest) && folder_files(dest) == folder_files(staged);
    fs::remove_all(staged);
    XTRAIN_USAGE_CHECK(same, "export: ", dest.string(), " already holds another tokenizer (not ", run_dir,
                       "'s): export into another folder, or delete it");
  } else {
    fs::rename(staged, dest);
  }
  std::cout << "tokenizer: " << dest.string() << " (" << tokenizer->type() << ", " << tokenizer->vocab_size()
            << " ids), from " << source << std::endl;
}

int export_safetensors(const std::string& run_dir, const std::string& tag, const std::string& out,
                       const std::string& layout) {
  XTRAIN_USAGE_CHECK(layout == "xtrain" || layout == "hf-gpt2", "export: --layout must be xtrain or hf-gpt2, got '",
                     layout, "'");
  const auto run = load_trained_run(run_dir, tag);
  XTRAIN_USAGE_CHECK(layout == "xtrain" || run.config.model.type == "gpt",
                     "export: --layout hf-gpt2 needs a gpt model; ", run_dir, " holds a ", run.config.model.type,
                     " (use --layout xtrain)");
  checkpoint::NamedTensors tensors;
  for (const auto& item : run.model.module->named_parameters(true)) tensors.emplace_back(item.key(), item.value());
  for (const auto& item : run.model.module->named_buffers(true)) tensors.emplace_back(item.key(), item.value());
  if (layout == "hf-gpt2") tensors = models::to_hf_gpt2(tensors);
  export_run_tokenizer(run_dir, run.config, out);  // first: a refused tokenizer folder leaves no half export
  const auto model_config = nlohmann::json::parse(config::to_json(run.config))["xtrain"]["model"];
  const checkpoint::SafetensorsMetadata meta = {
      {"format", "pt"}, {"xtrain.layout", layout}, {"xtrain.model", model_config.dump()}};
  const auto digest = checkpoint::write_safetensors(out, tensors, meta);
  std::cout << "wrote " << out << ": " << tensors.size() << " tensors (" << layout << " layout), " << digest.bytes
            << " bytes, from " << run.checkpoint_dir << std::endl;
  return 0;
}

}  // namespace xtrain::cli
