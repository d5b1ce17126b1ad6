// Tokenizers: the byte tokenizer against its closed form (id == byte), SentencePiece BPE and
// unigram trained on a slice of Moby Dick (exact round-trips, save -> load keeps the ids, and
// Debian's `spm_encode` CLI on the saved .model gives the same ids: an independent reference),
// and the errors a user meets (unknown type, vocabulary too small, missing tokenizer.json).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/errors.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/data/datasets.h"
#include "xtrain/data/dataset.h"
#include "xtrain/data/tokenizer/tokenizer.h"

namespace xtrain::data::tokenizer_test {
namespace {
namespace fs = std::filesystem;

using xtrain::testing::usage_error;

// The first `lines` lines of the fetched Moby Dick, or "" when it is not fetched.
std::string moby_dick_lines(int lines) {
  std::ifstream in(default_cache_dir() + "/mobydick/data.txt");
  std::string out, line;
  for (int i = 0; i < lines && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

std::string write_text(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/train.txt";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Text a SentencePiece model trained with identity normalization must still round-trip: runs of
// spaces, a leading space, tabs, blank lines, and characters it never saw (byte fallback).
const char* kAwkward =
    "  Call me   Ishmael.\n\n\tSome years ago\xe2\x80\x94never mind how long. \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\x8b!";

TEST(ByteTokenizer, IdsAreBytes) {
  auto tok = make_tokenizer(TokenizerSpec{});
  EXPECT_EQ(tok->type(), "byte");
  EXPECT_EQ(tok->vocab_size(), 256);
  EXPECT_FALSE(tok->end_of_text().has_value());
  const std::string text("A\xff\n\x00z", 5);
  auto ids = tok->encode(text);
  EXPECT_EQ(ids, (std::vector<int32_t>{65, 255, 10, 0, 122}));
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_EQ(usage_error([&] { tok->decode({256}); }), "tokenizer: byte id 256 at position 0 is outside [0, 256)");
  const std::string dir = testing::temp_dir("tok_byte");
  tok->save(dir);
  EXPECT_EQ(load_tokenizer(dir)->type(), "byte");
}

TEST(Tokenizer, Errors) {
  TokenizerSpec spec;
  spec.type = "wordpiece";
  EXPECT_EQ(usage_error([&] { make_tokenizer(spec); }),
            "tokenizer: unknown type \"wordpiece\"; expected one of byte, bpe, unigram, gpt2");
  const std::string dir = testing::temp_dir("tok_err");
  EXPECT_EQ(usage_error([&] { load_tokenizer(dir); }),
            "tokenizer: no " + dir + "/tokenizer.json (a tokenizer folder holds tokenizer.json, written by "
                                     "Tokenizer::save)");
  spec.type = "bpe";
  spec.vocab_size = 100;
  EXPECT_NE(usage_error([&] { make_tokenizer(spec); }).find("needs training text files or a SentencePiece .model"),
            std::string::npos);
  const std::string corpus = write_text(dir, "the quick brown fox jumps over the lazy dog\n");
  const std::string e = usage_error([&] { make_tokenizer(spec, {corpus}); });
  EXPECT_NE(e.find("training the bpe tokenizer with vocabulary size 100 failed"), std::string::npos) << e;
  EXPECT_NE(e.find("use a larger --vocab-size"), std::string::npos) << e;
  spec.model_file = dir + "/none.model";
  EXPECT_EQ(usage_error([&] { make_tokenizer(spec); }),
            "tokenizer: SentencePiece model " + dir + "/none.model does not exist");
}

// spm_encode's ids for each line of `text` (it encodes line by line), one line of ids per line.
std::string spm_encode_ids(const std::string& model, const std::string& text_file) {
  std::string out;
  EXPECT_EQ(testing::run_command("spm_encode --model=" + model + " --output_format=id < " + text_file, &out), 0)
      << out;
  return out;
}

std::string our_ids_per_line(const Tokenizer& tok, const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    std::string ids;
    for (int32_t id : tok.encode(line)) ids += (ids.empty() ? "" : " ") + std::to_string(id);
    out += ids + "\n";
  }
  return out;
}

void check_sentencepiece(const std::string& type) {
  const std::string text = moby_dick_lines(1500);
  if (text.empty()) GTEST_SKIP() << "Moby Dick not fetched (scripts/fetch-data)";
  const std::string dir = testing::temp_dir("tok_" + type);
  const std::string corpus = write_text(dir, text);
  TokenizerSpec spec;
  spec.type = type;
  spec.vocab_size = 1000;
  auto tok = make_tokenizer(spec, {corpus});
  EXPECT_EQ(tok->type(), type);
  EXPECT_EQ(tok->vocab_size(), 1000);
  auto ids = tok->encode(text);
  EXPECT_LT(ids.size(), text.size() / 2) << "a 1000-piece vocabulary should compress English text";
  EXPECT_EQ(tok->decode(ids), text);
  EXPECT_EQ(tok->decode(tok->encode(kAwkward)), kAwkward);
  EXPECT_EQ(tok->decode(tok->encode("")), "");

  tok->save(dir + "/saved");
  auto loaded = load_tokenizer(dir + "/saved");
  EXPECT_EQ(loaded->type(), type);
  EXPECT_EQ(loaded->encode(text), ids);
  EXPECT_EQ(loaded->encode(kAwkward), tok->encode(kAwkward));

  if (testing::run_command("command -v spm_encode") != 0) GTEST_SKIP() << "spm_encode not installed (sentencepiece)";
  EXPECT_EQ(spm_encode_ids(dir + "/saved/sentencepiece.model", corpus), our_ids_per_line(*loaded, text));
}

TEST(SentencePieceTokenizer, BpeRoundTripsAndMatchesSpmEncode) { check_sentencepiece("bpe"); }
TEST(SentencePieceTokenizer, UnigramRoundTripsAndMatchesSpmEncode) { check_sentencepiece("unigram"); }

}  // namespace
}  // namespace xtrain::data::tokenizer_test
