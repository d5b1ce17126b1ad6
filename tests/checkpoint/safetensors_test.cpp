// safetensors against an independent implementation of the spec (tests/reference/gen_safetensors.py: struct + json +
// numpy): its file of every dtype reads back equal to the torch.save'd values, our file is read by its reader equal to
// what we wrote, and each malformed file is a clear error naming the file.
#include "xtrain/checkpoint/safetensors.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>

#include <fstream>

#include "support/fixtures.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/tensor_file.h"

namespace xtrain::checkpoint::safetensors_test {
namespace {

void expect_same(const at::Tensor& actual, const at::Tensor& expected, const std::string& name) {
  ASSERT_TRUE(actual.defined()) << name;
  EXPECT_EQ(actual.scalar_type(), expected.scalar_type()) << name;
  EXPECT_EQ(actual.sizes(), expected.sizes()) << name;
  if (actual.scalar_type() == expected.scalar_type() && actual.sizes() == expected.sizes()) {
    EXPECT_TRUE(at::equal(actual, expected)) << name;
  }
}

at::Tensor find(const NamedTensors& ts, const std::string& name) {
  for (const auto& [n, t] : ts) {
    if (n == name) return t;
  }
  return {};
}

TEST(Safetensors, ReadsEveryDtypeOfAnIndependentWriter) {
  const auto file = read_safetensors(testing::fixture("safetensors/dtypes.safetensors"));
  const auto expected = testing::load_tensors("safetensors/dtypes.pt");
  ASSERT_EQ(file.tensors.size(), expected.size());
  for (const auto& [name, t] : expected) expect_same(find(file.tensors, name), t, name);
  // Data order, not name order: the generator wrote z.f64 first and a.last_f32 last.
  EXPECT_EQ(file.tensors.front().first, "z.f64");
  EXPECT_EQ(file.tensors.back().first, "a.last_f32");
  EXPECT_EQ(file.metadata.at("format"), "pt");
  EXPECT_EQ(file.metadata.at("note"), "gen_safetensors.py");
}

TEST(Safetensors, IndependentReaderReadsOurFile) {
  if (testing::run_command("/usr/bin/python3 -c 'import torch'") != 0) GTEST_SKIP() << "no /usr/bin/python3 torch";
  NamedTensors ours;
  for (const auto& [name, t] : testing::load_tensors("safetensors/dtypes.pt")) ours.emplace_back(name, t);
  ours.emplace_back("strided.view", at::arange(20, at::kFloat).view({4, 5}).t().slice(0, 1, 4));
  const std::string dir = testing::temp_dir("safetensors-w");
  const auto digest = write_safetensors(dir + "/ours.safetensors", ours, {{"format", "pt"}, {"k", "v \"q\""}});
  std::string out;
  ASSERT_EQ(
      testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/tests/reference/gen_safetensors.py read " +
                               dir + "/ours.safetensors " + dir + "/back.pt 2>&1",
                           &out),
      0)
      << out;
  EXPECT_EQ(out, "{\"format\": \"pt\", \"k\": \"v \\\"q\\\"\"}\n");
  const auto back = read_tensor_file(dir + "/back.pt");
  ASSERT_EQ(back.size(), ours.size());
  for (const auto& [name, t] : ours) expect_same(find(back, name), t, name);
  EXPECT_EQ(digest.bytes, static_cast<int64_t>(std::ifstream(dir + "/ours.safetensors", std::ios::ate).tellg()));
  // And our reader agrees with our writer, order kept.
  const auto again = read_safetensors(dir + "/ours.safetensors");
  ASSERT_EQ(again.tensors.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_EQ(again.tensors[i].first, ours[i].first);
}

TEST(Safetensors, WriterRejectsWhatTheFormatCannotHold) {
  const std::string dir = testing::temp_dir("safetensors-bad-w");
  EXPECT_THROW(write_safetensors(dir + "/a.safetensors", {{"x", at::randn({2}, at::kComplexFloat)}}), UsageError);
  EXPECT_THROW(write_safetensors(dir + "/b.safetensors", {{"x", at::full({1}, 1.0)}, {"x", at::full({1}, 2.0)}}),
               UsageError);
}

// A file from raw parts: the length field (default: the header's size), the header text, data bytes.
std::string raw_file(const std::string& tag, const std::string& header, size_t data_bytes, int64_t length = -1) {
  const std::string path = testing::temp_dir("safetensors-bad") + "/" + tag + ".safetensors";
  std::ofstream f(path, std::ios::binary);
  uint64_t n = length < 0 ? header.size() : static_cast<uint64_t>(length);
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
  f << header << std::string(data_bytes, '\0');
  return path;
}

void expect_error(const std::string& path, const std::string& words) {
  try {
    read_safetensors(path);
    ADD_FAILURE() << path << ": no error (expected '" << words << "')";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(words), std::string::npos) << what;
  }
}

const std::string kOne = R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})";

TEST(Safetensors, TruncatedFilesAreErrorsNamingTheFile) {
  EXPECT_NO_THROW(read_safetensors(raw_file("ok", kOne, 16)));
  expect_error(raw_file("short-data", kOne, 12), "run past the data section (12 bytes");
  expect_error(raw_file("short-header", kOne, 0, 4096), "truncated: the header says 4096 bytes");
  const std::string tiny = testing::temp_dir("safetensors-bad") + "/tiny.safetensors";
  std::ofstream(tiny) << "abc";
  expect_error(tiny, "fewer than the 8-byte header length");
}

TEST(Safetensors, BadOffsetsAreErrorsNamingTheTensor) {
  const std::string two =
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                             "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  expect_error(raw_file("overlap", two, 12), "tensor 'b' data_offsets [4, 12] overlap tensor 'a'");
  const std::string hole =
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})";
  expect_error(raw_file("hole", hole, 20), "a hole of 4 bytes before tensor 'b'");
  expect_error(raw_file("trailing", kOne, 20), "4 bytes after the last tensor belong to no tensor");
  const std::string size = R"({"a": {"dtype": "F64", "shape": [3], "data_offsets": [0, 16]}})";
  expect_error(raw_file("size", size, 16), "tensor 'a' is F64 [3] (24 bytes) but data_offsets [0,16] span 16 bytes");
  const std::string negative = R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})";
  expect_error(raw_file("negative", negative, 4), "must be a non-negative integer");
}

TEST(Safetensors, UnknownDtypeAndNonJsonHeaderAreErrors) {
  const std::string c64 = R"({"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}})";
  expect_error(raw_file("dtype", c64, 8), "tensor 'a' has unknown dtype \"C64\"");
  expect_error(raw_file("json", "{\"a\": [1, 2", 0), "the header is not a JSON object");
  expect_error(raw_file("array", "[1, 2]", 0), "the header is not a JSON object");
  expect_error(raw_file("huge", kOne, 16, int64_t(1) << 40), "not a safetensors file");
  const std::string missing = R"({"a": {"dtype": "F32", "shape": [1]}})";
  expect_error(raw_file("fields", missing, 4), "must be an object with dtype, shape and data_offsets");
}

}  // namespace
}  // namespace xtrain::checkpoint::safetensors_test
