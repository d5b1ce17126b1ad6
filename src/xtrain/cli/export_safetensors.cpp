// export_safetensors.h: the run's tensors, renamed for the layout, written by checkpoint/safetensors.h.
#include "xtrain/cli/export_safetensors.h"

#include <nlohmann/json.hpp>

#include <iostream>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/safetensors.h"
#include "xtrain/config/config.h"
#include "xtrain/models/hf_gpt2.h"
#include "xtrain/run/train.h"

namespace xtrain::cli {

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
  const auto model_config = nlohmann::json::parse(config::to_json(run.config))["xtrain"]["model"];
  const checkpoint::SafetensorsMetadata meta = {
      {"format", "pt"}, {"xtrain.layout", layout}, {"xtrain.model", model_config.dump()}};
  const auto digest = checkpoint::write_safetensors(out, tensors, meta);
  std::cout << "wrote " << out << ": " << tensors.size() << " tensors (" << layout << " layout), " << digest.bytes
            << " bytes, from " << run.checkpoint_dir << std::endl;
  return 0;
}

}  // namespace xtrain::cli
