// The tokenizer implementations behind make_tokenizer / load_tokenizer (tokenizer.cpp dispatches on
// the type). Internal to data/tokenizer/: callers use tokenizer.h.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "xtrain/data/tokenizer/tokenizer.h"

namespace xtrain::data {

constexpr const char* kTokenizerFile = "tokenizer.json";

std::unique_ptr<Tokenizer> make_byte_tokenizer();

// type "bpe" or "unigram". Trains a SentencePiece model of `vocab_size` pieces on the files.
std::unique_ptr<Tokenizer> train_sentencepiece(const std::string& type, int64_t vocab_size,
                                               const std::vector<std::filesystem::path>& files);
// A serialized SentencePiece model (.model file); `type` is checked against the model's own.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& type, const std::filesystem::path& model_file);

// GPT-2's encoder.json + vocab.bpe in `dir`.
std::unique_ptr<Tokenizer> load_gpt2(const std::filesystem::path& dir);

}  // namespace xtrain::data
