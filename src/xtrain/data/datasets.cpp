// The built-in datasets' openers: resolve xtrain.data.path to files — the fetched defaults under the
// cache folder or Debian's Fashion-MNIST — and build the train/val Dataset pair. A missing default
// dataset names the command that installs it. open_datasets asks the registry (data/registry.h).
#include "xtrain/data/datasets.h"

#include <sys/stat.h>

#include <cmath>

#include "xtrain/base/env.h"
#include "xtrain/base/error.h"
#include "xtrain/data/dataset.h"
#include "xtrain/data/idx.h"
#include "xtrain/data/image_dataset.h"
#include "xtrain/data/registry.h"
#include "xtrain/data/text_dataset.h"

namespace xtrain::data {
namespace {

constexpr const char* kFetchHint = "run scripts/fetch-data (scripts/xtrain and scripts/test run it for you)";
constexpr const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Per-pixel mean/std of pixel/255 over each training set (all 60000×28×28 pixels). MNIST's pair is
// the one PyTorch's examples/mnist uses; both were recomputed from the files with /usr/bin/python3
// (torch.frombuffer(train_images[16:]).double().div(255).mean()/.std()) and agree to 4 digits.
constexpr ImageNormalisation kMnistNorm{0.1307, 0.3081};
constexpr ImageNormalisation kFashionNorm{0.2860, 0.3530};

}  // namespace

Splits open_text_dataset(const DataOptions& o, int64_t seq_len, const std::string& cache_dir) {
  XTRAIN_USAGE_CHECK(!o.path.empty(), "data: xtrain.data.path is empty: give a text file or 'mobydick'");
  XTRAIN_USAGE_CHECK(o.val_fraction > 0.0 && o.val_fraction < 1.0,
                     "data: xtrain.data.val_fraction must be in (0, 1), got ", o.val_fraction);
  std::string path = o.path;
  if (o.path == "mobydick") {
    path = cache_dir + "/mobydick/data.txt";
    XTRAIN_USAGE_CHECK(is_file(path), "dataset 'mobydick' not found at ", path, ": ", kFetchHint);
  } else {
    XTRAIN_USAGE_CHECK(is_file(path), "data: text file ", path, " not found (xtrain.data.path)");
  }
  auto file = std::make_shared<const MappedFile>(path);
  const int64_t n = file->size();
  const int64_t val_bytes = int64_t(std::floor(double(n) * o.val_fraction));
  Splits s;
  s.train = std::make_shared<TextDataset>(file, 0, n - val_bytes, seq_len, "train");
  s.val = std::make_shared<TextDataset>(file, n - val_bytes, n, seq_len, "val");
  return s;
}

namespace {

// <dir>/<stem> or <dir>/<stem>.gz; "" when neither exists.
std::string find_idx(const std::string& dir, const std::string& stem) {
  for (const std::string& candidate : {dir + "/" + stem, dir + "/" + stem + ".gz"}) {
    if (is_file(candidate)) return candidate;
  }
  return "";
}

std::shared_ptr<Dataset> open_idx_split(const std::string& dir, const std::string& split, ImageNormalisation norm,
                                        const std::string& missing_hint, int64_t resize = 0) {
  const std::string images_stem = split + "-images-idx3-ubyte", labels_stem = split + "-labels-idx1-ubyte";
  const std::string images = find_idx(dir, images_stem), labels = find_idx(dir, labels_stem);
  for (const auto& [found, stem] : {std::pair{images, images_stem}, std::pair{labels, labels_stem}}) {
    XTRAIN_USAGE_CHECK(!found.empty(), missing_hint, " (no ", dir, "/", stem, "[.gz])");
  }
  return std::make_shared<ImageDataset>(read_idx_images(images), read_idx_labels(labels), norm, 10,
                                        images + " + " + labels, resize);
}

}  // namespace

Splits open_idx_dataset(const DataOptions& o, const std::string& cache_dir, bool fashion) {
  // xtrain.data.path defaults to "mobydick" (the text default): for images that means "the default".
  const bool default_path = o.path.empty() || o.path == "mobydick";
  std::string dir = default_path ? "" : o.path, hint;
  if (default_path && fashion) {
    dir = kFashionDir;
    hint = c10::str("dataset 'fashion_mnist' not found at ", dir,
                    ": install Debian's dataset-fashion-mnist (scripts/fetch-data does)");
  } else if (default_path) {
    dir = cache_dir + "/mnist";
    hint = c10::str("dataset 'mnist' not found at ", dir, ": ", kFetchHint);
  } else {
    hint = c10::str("data: xtrain.data.path '", dir, "' must be a folder holding the four IDX files ",
                    "{train,t10k}-{images-idx3,labels-idx1}-ubyte (plain or .gz)");
  }
  const ImageNormalisation norm = fashion ? kFashionNorm : kMnistNorm;
  Splits s;
  s.train = open_idx_split(dir, "train", norm, hint, o.image_size);
  s.val = open_idx_split(dir, "t10k", norm, hint, o.image_size);
  const auto train_shape = s.train->info().sample_shape, val_shape = s.val->info().sample_shape;
  XTRAIN_USAGE_CHECK(train_shape == val_shape, "data: wrong dims in ", dir, ": train images are ",
                     c10::IntArrayRef(train_shape), ", t10k images are ", c10::IntArrayRef(val_shape));
  return s;
}

Splits open_datasets(const DataOptions& options, int64_t seq_len, const std::string& cache_dir) {
  Splits s = find_dataset(options.type).open(options, seq_len, cache_dir);
  XTRAIN_USAGE_CHECK(s.train && s.val, "data: the dataset registered as xtrain.data.type \"", options.type,
                     "\" opened no train or no val split");
  // Only the image datasets read it: anywhere else it would be a silent no-op.
  const std::vector<int64_t> resized = {1, options.image_size, options.image_size};
  XTRAIN_USAGE_CHECK(options.image_size == 0 || s.train->info().sample_shape == resized,
                     "data: xtrain.data.image_size (", options.image_size, ") applies to the image datasets (mnist, ",
                     "fashion_mnist); xtrain.data.type \"", options.type, "\" does not resize: remove the key");
  return s;
}

std::string default_cache_dir() {
  if (auto dir = env::get("XTRAIN_DATA_DIR")) return *dir;
  // Without $HOME (some batch systems) fall back to the working directory rather than "/".
  return env::get_or("HOME", ".") + "/.cache/xtrain/data";
}

}  // namespace xtrain::data
