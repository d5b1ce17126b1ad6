// The tokens dataset at scale and `data prepare`: the window sampler is deterministic and resumes
// exactly (through the Loader, as a checkpoint restores it), a 4.5 GB sparse shard set is sampled
// with bounded peak RSS, and prepare_tokens' shards hold the corpus's bytes (byte tokenizer: the
// tokens are the text itself, an independent expectation) split as documented.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "support/errors.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/data/loader.h"
#include "xtrain/data/token_dataset.h"
#include "xtrain/data/token_prepare.h"
#include "xtrain/data/token_shards.h"

namespace xtrain::data::token_shards_prepare_test {
namespace {
namespace fs = std::filesystem;

using xtrain::testing::usage_error;

DataOptions tokens_options(const std::string& dir) {
  DataOptions o;
  o.type = "tokens";
  o.path = dir;
  return o;
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<int64_t> shard_tokens(const std::string& path) {
  const TokenShard s(path, ShardFormat::kLlmc);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < s.size(); ++i) out.push_back(s[i]);
  return out;
}

Splits small_splits() {
  const std::string dir = testing::temp_dir("tokens_small");
  std::vector<int32_t> t(5000);
  for (size_t i = 0; i < t.size(); ++i) t[i] = int32_t((i * 31) % 1000);
  for (const char* name : {"/c_train_000000.bin", "/c_val_000000.bin"}) {
    TokenShardWriter w(dir + name, false);
    w.append(t.data(), int64_t(t.size()));
    w.close();
  }
  DataOptions o = tokens_options(dir);
  o.args = {{"vocab_size", 1000}};
  return open_datasets(o, 16, "");
}

TEST(TokenSampler, DeterministicFromTheSeedAndResumesExactly) {
  const Splits s = small_splits();
  auto a = s.train->make_sampler(7, 0, 1), b = s.train->make_sampler(7, 0, 1), c = s.train->make_sampler(8, 0, 1);
  const auto first = a->next(700);  // crosses an epoch: 5000 / 17 = 294 draws each
  EXPECT_EQ(first, b->next(700));
  EXPECT_NE(first, c->next(700));
  EXPECT_EQ(a->state().epoch, 2);
  EXPECT_EQ(a->state().position, 700 - 2 * 294);
  const std::set<int64_t> distinct(first.begin(), first.end());
  EXPECT_GT(distinct.size(), 600u);  // uniform starts over 4984 windows: few repeats
  for (int64_t i : first) ASSERT_TRUE(0 <= i && i < s.train->size()) << i;
  // Two ranks take alternate draws of the one-rank stream.
  auto r0 = s.train->make_sampler(7, 0, 2), r1 = s.train->make_sampler(7, 1, 2);
  const auto x0 = r0->next(10), x1 = r1->next(10);
  for (size_t k = 0; k < 10; ++k) {
    EXPECT_EQ(x0[k], first[2 * k]);
    EXPECT_EQ(x1[k], first[2 * k + 1]);
  }
}

TEST(TokenSampler, LoaderResumesFromItsStateWithTheSameBatches) {
  const Splits s = small_splits();
  Loader whole(s.train, s.train->make_sampler(3, 0, 1), 4, 2);
  std::vector<at::Tensor> expected;
  for (int i = 0; i < 8; ++i) expected.push_back(whole.next().input);
  Loader first(s.train, s.train->make_sampler(3, 0, 1), 4, 2);
  for (int i = 0; i < 5; ++i) first.next();
  const SamplerState saved = first.state();  // what a checkpoint stores
  Loader resumed(s.train, s.train->make_sampler(3, 0, 1), 4, 2);
  resumed.set_state(saved);
  for (int i = 5; i < 8; ++i) EXPECT_TRUE(resumed.next().input.equal(expected[size_t(i)])) << "batch " << i;
}

int64_t status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::strlen(field)));
  }
  return -1;
}

TEST(TokenSampler, MultiGigabyteShardSetHasBoundedRss) {
  // Three sparse shards of 750M uint16 tokens (4.5 GB, no disk blocks: all zeros, valid tokens).
  const std::string dir = testing::temp_dir("tokens_sparse");
  const int64_t n = 750'000'000;
  for (const char* name : {"big_train_000000.bin", "big_train_000001.bin", "big_val_000000.bin"}) {
    { TokenShardWriter w(dir + "/" + name, false); w.close(); }
    std::fstream f(dir + "/" + name, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    const int32_t count = int32_t(n);
    f.write(reinterpret_cast<const char*>(&count), 4);
    f.close();
    fs::resize_file(dir + "/" + name, 1024 + 2 * n);
  }
  { std::ofstream("/proc/self/clear_refs") << "5"; }  // reset VmHWM to the current RSS
  const int64_t before = status_kib("VmRSS:");
  const Splits s = open_datasets(tokens_options(dir), 64, "");
  EXPECT_EQ(s.train->size(), 2 * (n - 64));
  auto sampler = s.train->make_sampler(1, 0, 1);
  for (int i = 0; i < 40; ++i) {
    const Batch b = s.train->collate(sampler->next(16));  // 640 windows in all
    ASSERT_EQ(b.input.sum().item<int64_t>(), 0);
  }
  auto val_sampler = s.val->make_sampler(0x5eed, 0, 1);  // as evaluate() asks for it
  s.val->collate(val_sampler->next(16));
  const int64_t peak = status_kib("VmHWM:");
  ASSERT_GT(before, 0);
  // A permutation of the 1.5G windows would be 12 GB; windows touch a few pages each.
  EXPECT_LT(peak - before, 200 * 1024) << "peak RSS rose by " << (peak - before) / 1024 << " MiB";
}

PrepareOptions byte_prepare(const std::string& out, std::vector<std::string> inputs) {
  PrepareOptions o;
  o.inputs = std::move(inputs);
  o.tokenizer.type = "byte";
  o.output = out;
  o.val_fraction = 0.1;
  return o;
}

TEST(DataPrepare, ByteTokensAreTheTextSplitTrainThenVal) {
  const std::string dir = testing::temp_dir("prepare_one");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "line " + std::to_string(i) + " of the corpus\n";
  write_text(dir + "/a.txt", text);
  const auto r = prepare_tokens(byte_prepare(dir + "/out", {dir + "/a.txt"}));
  const int64_t n = int64_t(text.size()), n_val = std::llround(n * 0.1);
  EXPECT_EQ(r.train_tokens, n - n_val);
  EXPECT_EQ(r.val_tokens, n_val);
  const auto train = shard_tokens(dir + "/out/train_000000.bin"), val = shard_tokens(dir + "/out/val_000000.bin");
  ASSERT_EQ(int64_t(train.size()), n - n_val);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t got = i < n - n_val ? train[size_t(i)] : val[size_t(i - (n - n_val))];
    ASSERT_EQ(got, int64_t(uint8_t(text[size_t(i)]))) << "byte " << i;
  }
  EXPECT_TRUE(fs::exists(dir + "/out/manifest.json"));
  const Splits s = open_datasets(tokens_options(dir + "/out"), 32, "");
  EXPECT_EQ(s.train->info().vocab, 256);
}

TEST(DataPrepare, ChunksThreadsShardsAndJsonl) {
  const std::string dir = testing::temp_dir("prepare_many");
  std::string a, b;
  for (int i = 0; i < 300; ++i) a += "alpha " + std::to_string(i) + "\n";
  for (int i = 0; i < 50; ++i) b += "{\"text\": \"doc " + std::to_string(i) + "\", \"id\": " + std::to_string(i) + "}\n";
  write_text(dir + "/a.txt", a);
  write_text(dir + "/b.jsonl", b);
  write_text(dir + "/empty.txt", "");
  PrepareOptions o = byte_prepare(dir + "/out", {dir + "/*.txt", dir + "/b.jsonl"});
  o.chunk_bytes = 100;
  o.threads = 3;
  o.shard_tokens = 500;
  const auto r = prepare_tokens(o);
  std::string docs;  // the byte tokenizer has no end-of-text: documents are concatenated
  for (int i = 0; i < 50; ++i) docs += "doc " + std::to_string(i);
  EXPECT_EQ(r.documents, 1 + 50);
  EXPECT_EQ(r.train_tokens + r.val_tokens, int64_t(a.size() + docs.size()));
  std::multiset<int64_t> got, want;
  for (char ch : a + docs) want.insert(uint8_t(ch));
  int64_t shards = 0;
  for (const auto& e : fs::directory_iterator(dir + "/out")) {
    if (e.path().extension() != ".bin") continue;
    const auto t = shard_tokens(e.path().string());
    EXPECT_LE(t.size(), 500u) << e.path();
    got.insert(t.begin(), t.end());
    ++shards;
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(shards, int64_t(r.files.size()));
  EXPECT_GE(shards, 4);
  // In order: the train stream is the text with each chunk's tail removed, so its first bytes are a's.
  const auto train0 = shard_tokens(dir + "/out/train_000000.bin");
  EXPECT_EQ(std::string(train0.begin(), train0.begin() + 20), a.substr(0, 20));
}

TEST(DataPrepare, BadInputsNameTheFile) {
  const std::string dir = testing::temp_dir("prepare_bad");
  EXPECT_NE(usage_error([&] { prepare_tokens(byte_prepare(dir + "/o", {dir + "/missing.txt"})); })
                .find(dir + "/missing.txt not found"),
            std::string::npos);
  EXPECT_NE(usage_error([&] { prepare_tokens(byte_prepare(dir + "/o", {dir + "/*.md"})); }).find("matches no file"),
            std::string::npos);
  write_text(dir + "/empty.txt", "");
  EXPECT_NE(usage_error([&] { prepare_tokens(byte_prepare(dir + "/o", {dir + "/empty.txt"})); }).find("empty corpus"),
            std::string::npos);
  write_text(dir + "/bad.jsonl", "{\"text\": \"ok\"}\n{\"body\": \"no text\"}\n");
  const std::string e = usage_error([&] { prepare_tokens(byte_prepare(dir + "/o", {dir + "/bad.jsonl"})); });
  EXPECT_NE(e.find(dir + "/bad.jsonl:2 has no string field \"text\""), std::string::npos) << e;
  PrepareOptions o = byte_prepare(dir + "/o", {dir + "/bad.jsonl"});
  o.tokenizer.type = "wordpiece";
  EXPECT_NE(usage_error([&] { prepare_tokens(o); }).find("--tokenizer"), std::string::npos);
}

}  // namespace
}  // namespace xtrain::data::token_shards_prepare_test
