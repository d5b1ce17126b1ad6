// How `xtrain federated` deals a training set out to K simulated clients: each client holds a list
// of sample indices of the one training split (sorted ascending, so one client holding everything
// walks the data exactly as `xtrain train` does). Three ways:
//   iid          a seeded permutation of [0, n) cut into K near-equal parts;
//   dirichlet:A  per class c, client shares p_c ~ Dirichlet(A, ..., A) (K entries), class c's
//                samples (seeded shuffle) cut by the cumulative shares (Hsu et al. 2019): A -> 0
//                gives clients of few classes, A -> infinity the IID proportions. Labelled data only;
//   contiguous   client k holds the index range [k n / K, (k+1) n / K): for text, whose sample i is
//                the window starting at byte i, a contiguous region of the corpus (the last windows
//                of a region read up to seq_len bytes into the next).
// All random draws come from splitmix64 (data/splitmix64.h), so a split is a function of the seed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace xtrain::data {
class Dataset;
}

namespace xtrain::federated {

struct SplitSpec {
  enum class Kind { iid, dirichlet, contiguous } kind = Kind::iid;
  double alpha = 0.0;  // dirichlet
  std::string describe() const;
};

// "iid" | "dirichlet:ALPHA" | "contiguous"; UsageError naming --split otherwise.
SplitSpec parse_split(const std::string& text);

using ClientIndices = std::vector<std::vector<int64_t>>;  // [client] -> sorted sample indices

ClientIndices split_iid(int64_t n, int64_t clients, uint64_t seed);
ClientIndices split_contiguous(int64_t n, int64_t clients);
// `labels[i]` in [0, classes).
ClientIndices split_dirichlet(const std::vector<int64_t>& labels, int64_t classes, int64_t clients, double alpha,
                              uint64_t seed);

// A Gamma(shape, 1) draw (Marsaglia and Tsang 2000; shape < 1 by the U^(1/shape) boost) from a
// splitmix64 stream: the Dirichlet's building block, the same on every platform.
double gamma_draw(double shape, uint64_t& state);

// The label of every sample of a classification dataset (its collated targets); UsageError naming
// --split when the targets are not one class index per sample (text).
std::vector<int64_t> dataset_labels(const data::Dataset& dataset, int64_t* classes);

// The split of `dataset` for `spec`.
ClientIndices split_dataset(const data::Dataset& dataset, const SplitSpec& spec, int64_t clients, uint64_t seed);

}  // namespace xtrain::federated
