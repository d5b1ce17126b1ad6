// `xtrain export --run DIR --safetensors OUT [--layout xtrain|hf-gpt2] [--tag T]`: the run's weights (every parameter
// and buffer, fp32 as trained) as one safetensors file. Layout xtrain keeps our names (what xtrain.model.init_from
// reads back); hf-gpt2 writes the Hugging Face GPT-2 names with Conv1D weights transposed (models/hf_gpt2.h). Metadata:
// format "pt" (what transformers' loader asks for), xtrain.layout and the run's model config.
#pragma once
#include <string>

namespace xtrain::cli {

int export_safetensors(const std::string& run_dir, const std::string& tag, const std::string& out,
                       const std::string& layout);

}  // namespace xtrain::cli
