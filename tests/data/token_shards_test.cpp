// Token shards: the writer's bytes against llm.c's layout read back by hand, files written by an
// independent writer (tests/reference/gen_llmc_shards.py: numpy, as llm.c and nanoGPT write them)
// read with the tokens of their closed form, and each bad input's message naming the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "support/errors.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/data/dataset.h"
#include "xtrain/data/token_dataset.h"
#include "xtrain/data/token_shards.h"

namespace xtrain::data::token_shards_test {
namespace {
namespace fs = std::filesystem;

using xtrain::testing::usage_error;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int32_t int_at(const std::string& bytes, size_t i) {
  int32_t v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

// The generator's closed form.
int64_t reference_token(int64_t i, int64_t offset, int64_t modulus) { return (i * 7919 + offset) % modulus; }

DataOptions tokens_options(const std::string& dir) {
  DataOptions o;
  o.type = "tokens";
  o.path = dir;
  return o;
}

void write_shard(const std::string& path, const std::vector<int32_t>& tokens, bool u32 = false) {
  TokenShardWriter w(path, u32);
  w.append(tokens.data(), int64_t(tokens.size()));
  w.close();
}

TEST(TokenShards, WriterLayoutIsLlmcs) {
  const std::string dir = testing::temp_dir("shard_layout");
  const std::vector<int32_t> tokens = {0, 1, 255, 256, 65535, 7};
  write_shard(dir + "/a.bin", tokens);
  write_shard(dir + "/b.bin", {70000, 3}, /*u32=*/true);
  const std::string a = file_bytes(dir + "/a.bin"), b = file_bytes(dir + "/b.bin");
  ASSERT_EQ(a.size(), 1024u + 2 * tokens.size());
  EXPECT_EQ(int_at(a, 0), 20240520);
  EXPECT_EQ(int_at(a, 1), 1);
  EXPECT_EQ(int_at(a, 2), 6);
  for (size_t i = 3; i < 256; ++i) ASSERT_EQ(int_at(a, i), 0) << "header int " << i;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto lo = uint8_t(a[1024 + 2 * i]), hi = uint8_t(a[1024 + 2 * i + 1]);
    EXPECT_EQ(lo | (hi << 8), tokens[i]) << "token " << i;  // little-endian uint16
  }
  ASSERT_EQ(b.size(), 1024u + 8);
  EXPECT_EQ(int_at(b, 0), 20240801);
  EXPECT_EQ(int_at(b, 1), 7);
  EXPECT_EQ(int_at(b, 2), 2);
  EXPECT_EQ(int_at(b, 256), 70000);
  // Round trip, and no temp file left beside the shards.
  const TokenShard ra(dir + "/a.bin", ShardFormat::kLlmc), rb(dir + "/b.bin", ShardFormat::kLlmc);
  ASSERT_EQ(ra.size(), 6);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(int64_t(ra[i]), tokens[size_t(i)]);
  EXPECT_TRUE(rb.uint32_tokens());
  EXPECT_EQ(rb[0], 70000u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
  EXPECT_NE(usage_error([&] { write_shard(dir + "/c.bin", {65536}); }).find("does not fit a uint16"),
            std::string::npos);
}

class ReferenceShards : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::temp_dir("llmc_reference");
    const std::string cmd = "/usr/bin/python3 " + testing::source_dir() + "/tests/reference/gen_llmc_shards.py " + dir_;
    std::string out;
    ASSERT_EQ(testing::run_command(cmd, &out), 0) << cmd << "\n" << out;
  }
  static std::string dir_;
};
std::string ReferenceShards::dir_;

// Windows of the dataset compared with the generator's closed form, shard by shard.
void expect_windows(const Dataset& d, const std::vector<std::pair<int64_t, int64_t>>& shards, int64_t modulus,
                    int64_t T) {
  int64_t first = 0;
  for (const auto& [count, offset] : shards) {
    for (int64_t start : {int64_t(0), count / 2, count - T - 1}) {
      const Batch b = d.collate({first + start});
      for (int64_t t = 0; t < T; ++t) {
        ASSERT_EQ(b.input[0][t].item<int64_t>(), reference_token(start + t, offset, modulus)) << start << "+" << t;
        ASSERT_EQ(b.target[0][t].item<int64_t>(), reference_token(start + t + 1, offset, modulus)) << start << "+" << t;
      }
    }
    first += count - T;
  }
  EXPECT_EQ(d.size(), first);
}

TEST_F(ReferenceShards, LlmcUint16ShardsLoadAsWritten) {
  const int64_t T = 16;
  const Splits s = open_datasets(tokens_options(dir_ + "/llmc"), T, "");
  EXPECT_EQ(s.train->info().vocab, 50257);  // no manifest: GPT-2's vocabulary
  expect_windows(*s.train, {{1000, 1}, {500, 2}}, 50257, T);
  expect_windows(*s.val, {{300, 3}}, 50257, T);
}

TEST_F(ReferenceShards, LlamaUint32ShardsLoadAsWritten) {
  const int64_t T = 8;
  const Splits s = open_datasets(tokens_options(dir_ + "/llama"), T, "");
  EXPECT_EQ(s.train->info().vocab, 128256);
  expect_windows(*s.train, {{800, 4}}, 128256, T);
  expect_windows(*s.val, {{200, 5}}, 128256, T);
}

TEST_F(ReferenceShards, NanoGptRawFilesLoadByName) {
  const int64_t T = 32;
  const Splits s = open_datasets(tokens_options(dir_ + "/nanogpt"), T, "");
  expect_windows(*s.train, {{1200, 6}}, 50257, T);
  expect_windows(*s.val, {{400, 7}}, 50257, T);
  // The same raw files under other names, with the format given.
  const std::string other = testing::temp_dir("nanogpt_flag");
  fs::copy_file(dir_ + "/nanogpt/train.bin", other + "/train.bin");
  fs::copy_file(dir_ + "/nanogpt/val.bin", other + "/val.bin");
  DataOptions o = tokens_options(other);
  o.args = {{"format", "nanogpt"}, {"vocab_size", 50304}};
  const Splits f = open_datasets(o, T, "");
  EXPECT_EQ(f.train->info().vocab, 50304);
  expect_windows(*f.train, {{1200, 6}}, 50257, T);
}

TEST(TokenShardErrors, EachNamesTheFile) {
  const std::string dir = testing::temp_dir("shard_errors");
  // A missing folder and a folder without shards.
  EXPECT_NE(usage_error([&] { open_datasets(tokens_options(dir + "/nope"), 8, ""); }).find(dir + "/nope"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { open_datasets(tokens_options(dir), 8, ""); }).find("no manifest.json"),
            std::string::npos);
  // A wrong magic.
  write_shard(dir + "/bad.bin", {1, 2, 3});
  {
    std::fstream f(dir + "/bad.bin", std::ios::in | std::ios::out | std::ios::binary);
    const int32_t magic = 12345;
    f.write(reinterpret_cast<const char*>(&magic), 4);
  }
  std::string e = usage_error([&] { TokenShard(dir + "/bad.bin", ShardFormat::kLlmc); });
  EXPECT_NE(e.find(dir + "/bad.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("magic 12345"), std::string::npos) << e;
  // Truncated tokens: the header announces 100, the file holds 99.
  std::vector<int32_t> hundred(100, 5);
  write_shard(dir + "/cut.bin", hundred);
  fs::resize_file(dir + "/cut.bin", 1024 + 2 * 99);
  e = usage_error([&] { TokenShard(dir + "/cut.bin", ShardFormat::kLlmc); });
  EXPECT_NE(e.find(dir + "/cut.bin is truncated"), std::string::npos) << e;
  // Shorter than the header; an odd-sized raw file; a missing file.
  fs::resize_file(dir + "/cut.bin", 100);
  EXPECT_NE(usage_error([&] { TokenShard(dir + "/cut.bin", ShardFormat::kLlmc); }).find("shorter than"),
            std::string::npos);
  fs::resize_file(dir + "/cut.bin", 101);
  EXPECT_NE(usage_error([&] { TokenShard(dir + "/cut.bin", ShardFormat::kRawU16); }).find("odd"), std::string::npos);
  EXPECT_NE(usage_error([&] { TokenShard(dir + "/gone.bin", ShardFormat::kLlmc); }).find(dir + "/gone.bin"),
            std::string::npos);
}

TEST(TokenShardErrors, VocabularyLargerThanTheModelsAndEmptyCorpus) {
  const std::string dir = testing::temp_dir("shard_vocab");
  write_shard(dir + "/x_train_000000.bin", {1, 2, 300, 4, 5, 6, 7, 8, 9, 10});
  write_shard(dir + "/x_val_000000.bin", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  DataOptions o = tokens_options(dir);
  o.args = {{"vocab_size", 256}};
  const Splits s = open_datasets(o, 4, "");
  const std::string e = usage_error([&] { s.train->collate({0}); });
  EXPECT_NE(e.find(dir + "/x_train_000000.bin holds token 300 at position 2"), std::string::npos) << e;
  EXPECT_NE(e.find("vocabulary of 256"), std::string::npos) << e;
  // Too few tokens for one window of seq_len + 1.
  const std::string e2 = usage_error([&] { open_datasets(o, 10, ""); });
  EXPECT_NE(e2.find("x_train_000000.bin"), std::string::npos) << e2;
  EXPECT_NE(e2.find("empty or too small corpus"), std::string::npos) << e2;
  // A misspelt setting.
  o.args = {{"vocab", 256}};
  EXPECT_NE(usage_error([&] { open_datasets(o, 4, ""); }).find("xtrain.data.args.vocab"), std::string::npos);
}

}  // namespace
}  // namespace xtrain::data::token_shards_test
