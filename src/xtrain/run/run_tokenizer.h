// The tokenizer a run's model reads: chosen from its data config, saved by `xtrain train` as
// <run_dir>/tokenizer/ (Tokenizer::save), and loaded from there by generate, so prompts are
// encoded and samples decoded as the training data was, even after the data folder is gone.
#pragma once
#include <memory>
#include <string>

#include "xtrain/config/config.h"
#include "xtrain/data/options.h"
#include "xtrain/data/tokenizer/tokenizer.h"

namespace xtrain {

// The data's tokenizer: xtrain.data.args.tokenizer (byte, gpt2, or a folder holding tokenizer.json),
// else the tokenizer.json saved in the xtrain.data.path folder (`xtrain data prepare` writes it),
// else the manifest's byte or gpt2, else bytes for the `text` dataset; nullptr for data that is
// not text (images).
std::unique_ptr<data::Tokenizer> data_tokenizer(const data::DataOptions& data);

// Writes data_tokenizer(data) into <run_dir>/tokenizer/ (nothing for non-text data).
void save_run_tokenizer(const data::DataOptions& data, const std::string& run_dir);

// <run_dir>/tokenizer/ when the run saved one (runs from before it existed: data_tokenizer of its
// config, else bytes). UsageError when its vocabulary is larger than the model's `vocab`.
std::unique_ptr<data::Tokenizer> load_run_tokenizer(const std::string& run_dir, const config::Config& config,
                                                    int64_t vocab);

}  // namespace xtrain
