// `xtrain export --run DIR --safetensors OUT [--layout xtrain|hf-gpt2] [--tag T]`: the run's weights (every parameter
// and buffer, fp32 as trained) as one safetensors file. Layout xtrain keeps our names (what xtrain.model.init_from
// reads back); hf-gpt2 writes the Hugging Face GPT-2 names with Conv1D weights transposed (models/hf_gpt2.h). Metadata:
// format "pt" (what transformers' loader asks for), xtrain.layout and the run's model config.
// Both exports also copy the run's tokenizer next to the exported file (export_run_tokenizer).
#pragma once
#include <string>

namespace xtrain::config {
struct Config;
}

namespace xtrain::cli {

int export_safetensors(const std::string& run_dir, const std::string& tag, const std::string& out,
                       const std::string& layout);

// Both exports: the tokenizer the run's model reads (<run>/tokenizer/, or for a run from before runs kept it,
// the one its data config names) saved into tokenizer/ next to `out`, so the exported model can encode and
// decode on its own; prints where it went. Nothing for a model that reads no text (images). A tokenizer/
// folder there that holds a different tokenizer is a UsageError (export into another folder).
void export_run_tokenizer(const std::string& run_dir, const config::Config& config, const std::string& out);

}  // namespace xtrain::cli
