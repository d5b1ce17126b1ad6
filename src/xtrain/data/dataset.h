// Random-access datasets: a sample is addressed by an index in [0, size()); `collate` turns a
// list of indices into one Batch. Splits are separate Dataset objects.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/data/batch.h"
#include "xtrain/data/options.h"
#include "xtrain/data/sampler.h"

namespace xtrain::data {

struct DatasetInfo {
  std::string kind;          // "text" | "image"
  int64_t vocab = 0;         // text: 256 (bytes)
  int64_t seq_len = 0;       // text: T
  int64_t num_classes = 0;   // image
  std::vector<int64_t> sample_shape;  // image: {1, 28, 28}
  // Classification: the name of each class index (text_classify: the training file's labels);
  // empty when the classes are just their numbers (MNIST).
  std::vector<std::string> class_names;
  // Files the run directory keeps beside config.json, name -> contents (csv: standardization.json,
  // the training statistics the features were standardised with).
  std::vector<std::pair<std::string, std::string>> run_files;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Batch collate(const std::vector<int64_t>& indices) const = 0;
  virtual DatasetInfo info() const = 0;
  // The sampler that walks this dataset for one data-parallel rank. The default is a
  // DistributedSampler (each epoch a permutation of [0, size())); a dataset too large for a
  // permutation in memory (token shards of any size) supplies one that needs O(1) memory.
  virtual std::unique_ptr<Sampler> make_sampler(uint64_t seed, int64_t rank, int64_t world_size) const {
    return std::make_unique<DistributedSampler>(size(), seed, rank, world_size);
  }
};

struct Splits {
  std::shared_ptr<Dataset> train;
  std::shared_ptr<Dataset> val;
};

// Builds train/val from xtrain.data. `seq_len` is the model's context (text). `cache_dir` is where
// scripts/xtrain put the downloaded datasets ($XTRAIN_DATA_DIR, default ~/.cache/xtrain/data).
// A missing dataset is a UsageError that says which command fetches it.
Splits open_datasets(const DataOptions& options, int64_t seq_len, const std::string& cache_dir);

// $XTRAIN_DATA_DIR, or ~/.cache/xtrain/data.
std::string default_cache_dir();

}  // namespace xtrain::data
