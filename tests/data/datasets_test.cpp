// open_datasets: text windows and splits on a small file (hand-computed expectations), images
// from a synthetic IDX folder (normalisation against its closed form), missing-dataset messages,
// and smoke tests on the real MNIST / Fashion-MNIST / Moby Dick files when they are installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>

#include "support/errors.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/data/dataset.h"
#include "xtrain/data/idx.h"

namespace xtrain::data::datasets_test {
namespace {

using xtrain::testing::usage_error;

bool exists(const std::string& path) { return std::ifstream(path).good(); }

DataOptions text_options(const std::string& path, double val_fraction = 0.25) {
  DataOptions o;
  o.type = "text";
  o.path = path;
  o.val_fraction = val_fraction;
  return o;
}

TEST(TextData, WindowsAndSplitsByPosition) {
  const std::string dir = testing::temp_dir("text");
  const std::string path = dir + "/t.txt";
  std::ofstream(path) << "abcdefghijklmnopqrst";  // 20 bytes: train = first 15, val = last 5
  const Splits s = open_datasets(text_options(path), /*seq_len=*/4, "/unused");
  EXPECT_EQ(s.train->size(), 15 - 4);
  EXPECT_EQ(s.val->size(), 5 - 4);
  const DatasetInfo info = s.train->info();
  EXPECT_EQ(info.kind, "text");
  EXPECT_EQ(info.vocab, 256);
  EXPECT_EQ(info.seq_len, 4);

  const Batch b = s.train->collate({0, 10, 3});
  ASSERT_EQ(b.input.sizes(), (std::vector<int64_t>{3, 4}));
  ASSERT_EQ(b.input.scalar_type(), at::kLong);
  ASSERT_TRUE(b.input.is_contiguous() && b.target.is_contiguous());
  const char* want_in[] = {"abcd", "klmn", "defg"};
  const char* want_tg[] = {"bcde", "lmno", "efgh"};  // sample 10 is the last: its target ends at byte 14
  for (int r = 0; r < 3; ++r) {
    for (int t = 0; t < 4; ++t) {
      EXPECT_EQ(b.input[r][t].item<int64_t>(), want_in[r][t]) << r << "," << t;
      EXPECT_EQ(b.target[r][t].item<int64_t>(), want_tg[r][t]) << r << "," << t;
    }
  }
  const Batch v = s.val->collate({0});  // val = "pqrst"
  EXPECT_EQ(v.input[0][0].item<int64_t>(), 'p');
  EXPECT_EQ(v.target[0][3].item<int64_t>(), 't');
}

TEST(TextData, TooShortSplitNamesTheNumbers) {
  const std::string dir = testing::temp_dir("text");
  const std::string path = dir + "/t.txt";
  std::ofstream(path) << "abcdefghijklmnopqrst";
  const std::string e = usage_error([&] { open_datasets(text_options(path), 5, "/unused"); });
  EXPECT_NE(e.find("val split of " + path + " has 5 bytes, too short for seq_len 5"), std::string::npos) << e;
  const std::string f = usage_error([&] { open_datasets(text_options(path, 1.0), 4, "/unused"); });
  EXPECT_NE(f.find("val_fraction must be in (0, 1), got 1"), std::string::npos) << f;
}

TEST(TextData, MissingFilesSayWhatToDo) {
  std::string e = usage_error([] { open_datasets(text_options("mobydick"), 8, "/no/cache"); });
  EXPECT_EQ(e, "dataset 'mobydick' not found at /no/cache/mobydick/data.txt: run scripts/fetch-data "
               "(scripts/xtrain and scripts/test run it for you)");
  e = usage_error([] { open_datasets(text_options("/no/such.txt"), 8, "/no/cache"); });
  EXPECT_NE(e.find("text file /no/such.txt not found (xtrain.data.path)"), std::string::npos) << e;
}

std::string be32(uint32_t v) { return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)}; }

// A folder with {train,t10k}-{images,labels} IDX files: n images of 2×3 pixels, pixel p of image i
// = (40 i + p) % 256, label i % 10; gzipped or plain.
void write_idx_folder(const std::string& dir, int64_t n_train, int64_t n_val, bool gzip, int64_t labels_val = -1) {
  auto put = [&](const std::string& name, const std::string& bytes) {
    if (gzip) {
      gzFile f = gzopen((dir + "/" + name + ".gz").c_str(), "wb");
      gzwrite(f, bytes.data(), unsigned(bytes.size()));
      gzclose(f);
    } else {
      std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    }
  };
  for (const auto& [split, n, n_labels] : {std::tuple<std::string, int64_t, int64_t>{"train", n_train, n_train},
                                           {"t10k", n_val, labels_val < 0 ? n_val : labels_val}}) {
    std::string images = be32(kIdxImagesMagic) + be32(uint32_t(n)) + be32(2) + be32(3);
    for (int64_t i = 0; i < n; ++i)
      for (int p = 0; p < 6; ++p) images += char((40 * i + p) % 256);
    std::string labels = be32(kIdxLabelsMagic) + be32(uint32_t(n_labels));
    for (int64_t i = 0; i < n_labels; ++i) labels += char(i % 10);
    put(split + "-images-idx3-ubyte", images);
    put(split + "-labels-idx1-ubyte", labels);
  }
}

TEST(ImageData, NormalisesWithTheDatasetStatistics) {
  for (bool gz : {false, true}) {
    const std::string dir = testing::temp_dir("img");
    write_idx_folder(dir, 12, 7, gz);
    DataOptions o;
    o.type = "fashion_mnist";
    o.path = dir;
    const Splits s = open_datasets(o, 0, "/unused");
    EXPECT_EQ(s.train->size(), 12);
    EXPECT_EQ(s.val->size(), 7);
    const DatasetInfo info = s.train->info();
    EXPECT_EQ(info.kind, "image");
    EXPECT_EQ(info.num_classes, 10);
    EXPECT_EQ(info.sample_shape, (std::vector<int64_t>{1, 2, 3}));
    const Batch b = s.train->collate({11, 2});
    ASSERT_EQ(b.input.sizes(), (std::vector<int64_t>{2, 1, 2, 3}));
    ASSERT_EQ(b.input.scalar_type(), at::kFloat);
    ASSERT_EQ(b.target.scalar_type(), at::kLong);
    EXPECT_EQ(b.target[0].item<int64_t>(), 1);
    EXPECT_EQ(b.target[1].item<int64_t>(), 2);
    for (int p = 0; p < 6; ++p) {
      const double pixel = (40 * 11 + p) % 256;
      // The closed form in double vs our float table: float rounding only (1e-6 relative).
      EXPECT_NEAR(b.input[0][0][p / 3][p % 3].item<float>(), (pixel / 255.0 - 0.2860) / 0.3530, 1e-5) << p;
    }
  }
}

TEST(ImageData, CountMismatchAndMissingFiles) {
  const std::string dir = testing::temp_dir("img");
  write_idx_folder(dir, 4, 3, false, /*labels_val=*/2);
  DataOptions o;
  o.type = "mnist";
  o.path = dir;
  std::string e = usage_error([&] { open_datasets(o, 0, "/unused"); });
  EXPECT_NE(e.find("t10k-images-idx3-ubyte + " + dir + "/t10k-labels-idx1-ubyte: 3 images but 2 labels"),
            std::string::npos) << e;
  o.path = "";
  e = usage_error([&] { open_datasets(o, 0, "/no/cache"); });
  EXPECT_NE(e.find("dataset 'mnist' not found at /no/cache/mnist: run scripts/fetch-data"), std::string::npos) << e;
  o.path = dir + "/nothing-here";
  e = usage_error([&] { open_datasets(o, 0, "/no/cache"); });
  EXPECT_NE(e.find("must be a folder holding the four IDX files"), std::string::npos) << e;
}

TEST(DataDir, DefaultCacheDirFollowsTheEnvironment) {
  const char* old = std::getenv("XTRAIN_DATA_DIR");
  const std::string saved = old ? old : "";
  setenv("XTRAIN_DATA_DIR", "/somewhere/data", 1);
  EXPECT_EQ(default_cache_dir(), "/somewhere/data");
  unsetenv("XTRAIN_DATA_DIR");
  EXPECT_EQ(default_cache_dir(), std::string(std::getenv("HOME")) + "/.cache/xtrain/data");
  if (old) setenv("XTRAIN_DATA_DIR", saved.c_str(), 1);
}

// Expected values from an independent reader (gzip + struct, no torch), e.g. for labels:
// /usr/bin/python3 -c "import gzip; b=gzip.open(P,'rb').read(); print(len(b)-8, list(b[8:18]))"
// and for row 14 of image 0: list(b[16+28*14:16+28*15]).
struct RealSet {
  const char* type;
  std::vector<int> train_labels, val_labels;
  std::vector<int> row14;  // image 0 of train, row 14, raw pixels
  double mean, std;
};

void check_real(const RealSet& r, const std::string& dir) {
  DataOptions o;
  o.type = r.type;
  const Splits s = open_datasets(o, 0, default_cache_dir());
  ASSERT_EQ(s.train->size(), 60000);
  ASSERT_EQ(s.val->size(), 10000);
  EXPECT_EQ(s.train->info().sample_shape, (std::vector<int64_t>{1, 28, 28}));
  std::vector<int64_t> first(10);
  std::iota(first.begin(), first.end(), 0);
  const Batch train = s.train->collate(first), val = s.val->collate(first);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(train.target[i].item<int64_t>(), r.train_labels[i]) << r.type << " train " << i;
    EXPECT_EQ(val.target[i].item<int64_t>(), r.val_labels[i]) << r.type << " t10k " << i;
  }
  for (int x = 0; x < 28; ++x) {
    EXPECT_NEAR(train.input[0][0][14][x].item<float>(), (r.row14[x] / 255.0 - r.mean) / r.std, 1e-5) << x;
  }
}

TEST(RealData, FashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!exists(dir + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed";
  check_real({"fashion_mnist", {9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, {9, 2, 1, 1, 6, 1, 4, 6, 5, 7},
              {0, 0, 1, 4, 6, 7, 2, 0, 0, 0, 0, 0, 237, 226, 217, 223, 222, 219, 222, 221, 216, 223, 229, 215,
               218, 255, 77, 0},
              0.2860, 0.3530},
             dir);
}

TEST(RealData, Mnist) {
  const std::string dir = default_cache_dir() + "/mnist";
  if (!exists(dir + "/train-images-idx3-ubyte")) GTEST_SKIP() << "MNIST not fetched (scripts/fetch-data)";
  check_real({"mnist", {5, 0, 4, 1, 9, 2, 1, 3, 1, 4}, {7, 2, 1, 0, 4, 1, 4, 9, 5, 9},
              {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 81, 240, 253, 253, 119, 25, 0, 0, 0, 0, 0, 0, 0, 0, 0},
              0.1307, 0.3081},
             dir);
}

// /usr/bin/python3 -c "import math; b=open(P,'rb').read(); n=len(b); v=math.floor(n*0.1);
//   print(n, v, n-v-256, v-256, list(b[:8]), list(b[n-v:n-v+8]))"
TEST(RealData, MobyDick) {
  if (!exists(default_cache_dir() + "/mobydick/data.txt")) GTEST_SKIP() << "Moby Dick not fetched (scripts/fetch-data)";
  const Splits s = open_datasets(DataOptions{}, 256, default_cache_dir());
  EXPECT_EQ(s.train->size(), 1084242);
  EXPECT_EQ(s.val->size(), 120243);
  const std::vector<int> train0 = {67, 72, 65, 80, 84, 69, 82, 32}, val0 = {32, 97, 99, 99, 105, 100, 101, 110};
  const Batch t = s.train->collate({0}), v = s.val->collate({0});
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(t.input[0][i].item<int64_t>(), train0[i]) << i;
    EXPECT_EQ(v.input[0][i].item<int64_t>(), val0[i]) << i;
  }
}

}  // namespace
}  // namespace xtrain::data::datasets_test
