// Checkpoint store: round trips of every dtype and awkward shapes (checked against Python's
// torch.load / torch.save where Debian's python3-torch is present), corruption and missing files
// naming the file and the fallback tag, crash leftovers, commit order, prune, multi-rank writers.
#include <gtest/gtest.h>

#include <ATen/Functions.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/errors.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/checkpoint/tensor_file.h"

namespace xtrain::checkpoint::store_test {
namespace {
namespace fs = std::filesystem;

using xtrain::testing::usage_error;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

NamedTensors sample_tensors() {
  at::manual_seed(0);
  const at::Tensor big = at::randn({100, 100});
  return {
      {"layers.0.weight", at::randn({3, 4})},
      {"f64", at::randn({2, 2}, at::kDouble)},
      {"f16", at::randn({5}).to(at::kHalf)},
      {"bf16", at::randn({2, 3}).to(at::kBFloat16)},
      {"i64", at::arange(-3, 3, at::kLong)},
      {"i32", at::arange(6, at::kInt).view({2, 3})},
      {"i8", at::arange(-4, 4, at::kChar)},
      {"u8", at::arange(250, 256, at::kByte)},
      {"mask", at::arange(5) > 2},
      {"c64", at::randn({2}, at::kComplexFloat)},
      {"scalar", at::scalar_tensor(3.5)},
      {"empty", at::empty({0, 3})},
      {"transposed", at::randn({3, 5}).t()},
      {"row_of_big", big[7]},  // a view: only its 100 elements may be saved
  };
}

void expect_same(const NamedTensors& got, const NamedTensors& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << "order";
    EXPECT_EQ(got[i].second.scalar_type(), want[i].second.scalar_type()) << want[i].first;
    EXPECT_EQ(got[i].second.sizes(), want[i].second.sizes()) << want[i].first;
    EXPECT_TRUE(got[i].second.equal(want[i].second)) << want[i].first;
  }
}

void commit_one(const std::string& root, const std::string& tag, const NamedTensors& t, const std::string& extra = "{}") {
  CheckpointWriter w(root, tag);
  w.write_tensors("model.pt", t);
  w.write_text("notes.txt", "tag " + tag);
  w.finish_rank();
  w.commit(extra);
}

TEST(Checkpoint, RoundTripsEveryDtypeAndShape) {
  const std::string root = testing::temp_dir("ckpt");
  const NamedTensors t = sample_tensors();
  commit_one(root, "step1", t, R"({"step": 1, "loss": 2.5})");
  EXPECT_EQ(slurp(root + "/latest"), "step1");  // no newline, as DeepSpeed writes it
  const CheckpointReader r(root);
  EXPECT_EQ(r.tag(), "step1");
  EXPECT_EQ(r.files(), (std::vector<std::string>{"model.pt", "notes.txt"}));
  expect_same(r.read_tensors("model.pt"), t);
  EXPECT_EQ(r.read_text("notes.txt"), "tag step1");
  EXPECT_EQ(nlohmann::json::parse(r.extra_json()), nlohmann::json::parse(R"({"step": 1, "loss": 2.5})"));
  EXPECT_LT(fs::file_size(root + "/step1/model.pt"), 20000u) << "a view saved its base's whole storage";
  const nlohmann::json manifest = nlohmann::json::parse(slurp(root + "/step1/manifest.json"));
  EXPECT_EQ(manifest["format"], 1);
  EXPECT_EQ(manifest["tag"], "step1");
  EXPECT_EQ(manifest["files"]["notes.txt"]["bytes"], 9);
  // sha256 of "tag step1" from /usr/bin/python3 -c "import hashlib;print(hashlib.sha256(b'tag step1').hexdigest())"
  EXPECT_EQ(manifest["files"]["notes.txt"]["sha256"], "2db804ec6d7859a599603ec30482377860aedc77d6f8f62d31cdf69d5d7d3599");
}

// A file and tensor scope: the files on disk carry both prefixes, an unscoped reader sees them, a
// reader scoped the same way gets the writer's own names back.
TEST(Checkpoint, TensorScopeRenamesOnWriteAndBackOnRead) {
  const std::string root = testing::temp_dir("ckpt-scope");
  const NamedTensors t = sample_tensors();
  CheckpointWriter w(root, "step1", 0);
  w.write_tensors("model.pt", t);
  w.set_scope("rank_1_", "rank_1/");
  EXPECT_EQ(w.scope(), (std::pair<std::string, std::string>{"rank_1_", "rank_1/"}));
  w.write_tensors("model.pt", t);
  w.set_scope("");
  w.write_text("notes.txt", "after");
  w.finish_rank();
  w.commit();
  const CheckpointReader r(root);
  EXPECT_EQ(r.files(), (std::vector<std::string>{"model.pt", "notes.txt", "rank_1_model.pt"}));
  const auto raw = r.read_tensors("rank_1_model.pt");
  ASSERT_EQ(raw.size(), t.size());
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(raw[i].first, "rank_1/" + t[i].first);
  const auto scoped = r.scoped("rank_1_", "rank_1/");
  EXPECT_EQ(scoped.files(), (std::vector<std::string>{"model.pt"}));
  expect_same(scoped.read_tensors("model.pt"), t);
  expect_same(r.read_tensors("model.pt"), t);
}

bool have_python_torch() { return testing::run_command("/usr/bin/python3 -c 'import torch'") == 0; }

TEST(Checkpoint, PythonTorchLoadReadsOurFilesAndWeReadTorchSave) {
  if (!have_python_torch()) GTEST_SKIP() << "/usr/bin/python3 with torch not available";
  const std::string dir = testing::temp_dir("ckpt");
  write_tensor_file(dir + "/ours.pt", {{"a.b", at::arange(6, at::kFloat).view({2, 3})},
                                       {"mask", at::arange(3) > 0},
                                       {"h", at::full({2}, 1.5, at::kBFloat16)},
                                       {"view", at::arange(10, at::kLong).slice(0, 4, 7)}});
  // One interpreter start (importing torch takes ~2 s): read our file, then write one of its own.
  std::string out;
  ASSERT_EQ(testing::run_command("/usr/bin/python3 -c \"import torch; d=torch.load('" + dir +
                                     "/ours.pt'); print(list(d), d['a.b'].tolist(), d['mask'].tolist(), "
                                     "d['h'].dtype, d['h'].tolist(), d['view'].tolist(), d['view'].storage().size()); "
                                     "torch.save({'x': torch.arange(4, dtype=torch.int16), 'y.z': torch.tensor("
                                     "[[1.25, -2.0]], dtype=torch.float64)}, '" + dir + "/theirs.pt')\"",
                                 &out),
            0)
      << out;
  EXPECT_EQ(out, "['a.b', 'mask', 'h', 'view'] [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] [False, True, True] "
                 "torch.bfloat16 [1.5, 1.5] [4, 5, 6] 3\n");
  const NamedTensors theirs = read_tensor_file(dir + "/theirs.pt");
  ASSERT_EQ(theirs.size(), 2u);
  EXPECT_EQ(theirs[0].first, "x");
  EXPECT_TRUE(theirs[0].second.equal(at::arange(4, at::kShort)));
  EXPECT_EQ(theirs[1].first, "y.z");
  EXPECT_EQ(theirs[1].second.scalar_type(), at::kDouble);
  EXPECT_EQ(theirs[1].second[0][0].item<double>(), 1.25);
}

void flip_byte(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.get(c);
  f.seekp(offset);
  f.put(char(c ^ 0x5a));
}

TEST(Checkpoint, CorruptedFileNamesTheFileAndThePreviousTag) {
  const std::string root = testing::temp_dir("ckpt");
  commit_one(root, "step1", sample_tensors());
  commit_one(root, "step2", sample_tensors());
  flip_byte(root + "/step2/model.pt", int64_t(fs::file_size(root + "/step2/model.pt")) / 2);
  EXPECT_EQ(usage_error([&] { CheckpointReader r(root); }),
            "checkpoint " + root + "/step2: file model.pt is corrupted (sha256 mismatch); the previous checkpoint "
            "is step1 (--resume loads `latest`; point latest at step1 or delete the bad one)");
  const CheckpointReader previous(root, "step1");  // the fallback loads
  expect_same(previous.read_tensors("model.pt"), sample_tensors());
  flip_byte(root + "/step1/notes.txt", 0);
  EXPECT_NE(usage_error([&] { CheckpointReader r(root, "step1"); })
                .find("file notes.txt is corrupted (sha256 mismatch); there is no earlier checkpoint"),
            std::string::npos);
}

TEST(Checkpoint, MissingFileAndMissingTag) {
  const std::string root = testing::temp_dir("ckpt");
  commit_one(root, "a", sample_tensors());
  commit_one(root, "b", sample_tensors());
  fs::remove(root + "/b/notes.txt");
  EXPECT_EQ(usage_error([&] { CheckpointReader r(root); }),
            "checkpoint " + root + "/b: file notes.txt listed in manifest.json is missing; the previous checkpoint "
            "is a (--resume loads `latest`; point latest at a or delete the bad one)");
  EXPECT_NE(usage_error([&] { CheckpointReader r(root, "zzz"); }).find("tag zzz not found; committed tags: a, b"),
            std::string::npos);
  const std::string empty = testing::temp_dir("ckpt");
  EXPECT_NE(usage_error([&] { CheckpointReader r(empty); }).find("nothing to load"), std::string::npos);
  EXPECT_EQ(latest_tag(empty), "");
}

TEST(Checkpoint, CrashBeforeCommitLeavesThePreviousCheckpoint) {
  const std::string root = testing::temp_dir("ckpt");
  commit_one(root, "step1", sample_tensors());
  {
    CheckpointWriter crashed(root, "step2");
    crashed.write_tensors("model.pt", {{"w", at::zeros({3})}});
    crashed.finish_rank();  // ... and the process dies before commit()
  }
  EXPECT_EQ(latest_tag(root), "step1");
  EXPECT_EQ(list_tags(root), (std::vector<std::string>{"step1"}));
  expect_same(CheckpointReader(root).read_tensors("model.pt"), sample_tensors());
  EXPECT_TRUE(fs::exists(root + "/.tmp-step2"));
  commit_one(root, "step3", sample_tensors());
  EXPECT_FALSE(fs::exists(root + "/.tmp-step2")) << "the next commit cleans leftovers";
  EXPECT_EQ(list_tags(root), (std::vector<std::string>{"step1", "step3"}));
}

TEST(Checkpoint, RetryOfACrashedTagIgnoresStaleFiles) {
  const std::string root = testing::temp_dir("ckpt");
  {
    CheckpointWriter r0(root, "t"), r1(root, "t", 1);
    r0.write_tensors("rank0.pt", {{"w", at::zeros({2})}});
    r1.write_tensors("rank1.pt", {{"v", at::zeros({2})}});
    r1.finish_rank();  // crash: rank 0 never commits
  }
  CheckpointWriter again(root, "t");  // the restarted job has one rank
  again.write_tensors("rank0.pt", {{"w", at::ones({2})}});
  again.finish_rank();
  again.commit("{}", /*world_size=*/1);
  const CheckpointReader r(root);
  EXPECT_EQ(r.files(), (std::vector<std::string>{"rank0.pt"}));
  EXPECT_TRUE(r.read_tensors("rank0.pt")[0].second.equal(at::ones({2})));
  EXPECT_EQ(fs::directory_entry(root + "/t/.rank-1.json").exists(), false);
}

TEST(Checkpoint, CommitOrderNotNameOrder) {
  const std::string root = testing::temp_dir("ckpt");
  for (const char* tag : {"z", "a", "m", "b"}) commit_one(root, tag, {{"x", at::zeros({1})}});
  EXPECT_EQ(list_tags(root), (std::vector<std::string>{"z", "a", "m", "b"}));
  commit_one(root, "a", {{"x", at::ones({1})}});  // re-saving a tag replaces it and makes it the newest
  EXPECT_EQ(list_tags(root), (std::vector<std::string>{"z", "m", "b", "a"}));
  EXPECT_TRUE(CheckpointReader(root).read_tensors("model.pt")[0].second.equal(at::ones({1})));
  prune(root, 2);
  EXPECT_EQ(list_tags(root), (std::vector<std::string>{"b", "a"}));
  EXPECT_FALSE(fs::exists(root + "/z"));
  prune(root, 0);  // keep 0: delete none
  EXPECT_EQ(list_tags(root).size(), 2u);
}

TEST(Checkpoint, PruneNeverDeletesTheTagLatestNames) {
  const std::string root = testing::temp_dir("ckpt");
  for (const char* tag : {"s1", "s2", "s3"}) commit_one(root, tag, {{"x", at::zeros({1})}});
  std::ofstream(root + "/latest") << "s1";  // pointed back by hand after a bad s3
  prune(root, 1);
  EXPECT_EQ(list_tags(root), (std::vector<std::string>{"s1", "s3"}));
}

TEST(Checkpoint, TwoRanksWriteOneTag) {
  const std::string root = testing::temp_dir("ckpt");
  CheckpointWriter w0(root, "step5", 0), w1(root, "step5", 1);
  w1.write_tensors("zero_pp_rank_1.pt", {{"shard", at::full({4}, 1.0)}});
  w0.write_tensors("zero_pp_rank_0.pt", {{"shard", at::full({4}, 0.0)}});
  w0.write_text("config.json", "{}");
  w1.finish_rank();
  w0.finish_rank();
  w0.commit(R"({"world": 2})", 2);
  const CheckpointReader r(root);
  EXPECT_EQ(r.files(), (std::vector<std::string>{"config.json", "zero_pp_rank_0.pt", "zero_pp_rank_1.pt"}));
  EXPECT_TRUE(r.read_tensors("zero_pp_rank_1.pt")[0].second.equal(at::full({4}, 1.0)));

  CheckpointWriter lone(root, "step6", 0);
  lone.write_text("x", "1");
  lone.finish_rank();
  EXPECT_THROW(lone.commit("{}", 2), c10::Error);  // rank 1 never finished
  EXPECT_EQ(latest_tag(root), "step5");
}

TEST(Checkpoint, BadTagsAreUsageErrors) {
  const std::string root = testing::temp_dir("ckpt");
  for (const char* tag : {"", "a/b", ".hidden", "latest"}) {
    EXPECT_THROW(CheckpointWriter(root, tag), UsageError) << tag;
  }
}

NamedTensors weights(float bump) {
  at::manual_seed(3);
  NamedTensors t = {{"a", at::randn({4, 4})}, {"b", at::randn({7}).to(at::kBFloat16)}, {"c", at::arange(5)}};
  t[0].second[2][1] += bump;
  return t;
}

TEST(Fingerprint, DependsOnContentOnly) {
  const std::string run1 = testing::temp_dir("run"), run2 = testing::temp_dir("run");
  commit_one(run1 + "/checkpoints", "step1", weights(0));
  commit_one(run2 + "/checkpoints", "other_tag", weights(0));
  const std::string f = fingerprint(run1);  // a run directory
  EXPECT_EQ(f.size(), 64u);
  EXPECT_EQ(fingerprint(run2 + "/checkpoints"), f);              // a checkpoints root
  EXPECT_EQ(fingerprint(run1 + "/checkpoints/step1/"), f);       // a tag folder
  commit_one(run2 + "/checkpoints", "bumped", weights(1e-3f));
  EXPECT_NE(fingerprint(run2), f) << "one element changed";

  const std::string split = testing::temp_dir("ckpt");
  CheckpointWriter w(split, "s");
  NamedTensors t = weights(0);
  w.write_tensors("part2.pt", {t[2], t[0]});
  w.write_tensors("part1.pt", {t[1]});
  w.finish_rank();
  w.commit();
  EXPECT_EQ(fingerprint(split), f) << "independent of the file split and order";
  EXPECT_NE(usage_error([&] { fingerprint(testing::temp_dir("none")); }).find("neither a checkpoint folder"),
            std::string::npos);
}

}  // namespace
}  // namespace xtrain::checkpoint::store_test
