// Scorers and the score cache. The cache is one header line (the key that says what was scored)
// followed by raw int64 indices and float32 values, written to a temporary name and renamed, so
// a reader sees either no file or a whole one.
#include "xtrain/data/difficulty_scorer.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "xtrain/base/error.h"
#include "xtrain/base/log.h"
#include "xtrain/data/splitmix64.h"

namespace xtrain::data {
namespace {

constexpr int64_t kSubsetStream = -1;  // the subset's random stream: not any epoch's

std::string cache_key(const Dataset& dataset, const ScoringRequest& r) {
  return c10::str("xtrain difficulty scores v1 | scorer=", r.scorer, " size=", dataset.size(), " seq_len=",
                  dataset.info().seq_len, " samples=", r.samples, " seed=", r.seed, " reference=", r.reference);
}

bool read_cache(const std::string& path, const std::string& key, int64_t count, DifficultyScores& out) {
  std::ifstream in(path, std::ios::binary);
  std::string header;
  if (!in || !std::getline(in, header) || header != key) return false;
  out.indices.resize(count);
  out.values.resize(count);
  in.read(reinterpret_cast<char*>(out.indices.data()), std::streamsize(count * sizeof(int64_t)));
  in.read(reinterpret_cast<char*>(out.values.data()), std::streamsize(count * sizeof(float)));
  return bool(in) && in.peek() == std::char_traits<char>::eof();
}

void write_cache(const std::string& path, const std::string& key, const DifficultyScores& s) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << key << '\n';
    out.write(reinterpret_cast<const char*>(s.indices.data()), std::streamsize(s.indices.size() * sizeof(int64_t)));
    out.write(reinterpret_cast<const char*>(s.values.data()), std::streamsize(s.values.size() * sizeof(float)));
    XTRAIN_USAGE_CHECK(bool(out), "data: cannot write the difficulty score cache ", tmp);
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

double unigram_entropy_bits(const int64_t* tokens, int64_t n) {
  if (n <= 0) return 0.0;
  std::vector<int64_t> sorted(tokens, tokens + n);  // any vocabulary: count runs of equal tokens
  std::sort(sorted.begin(), sorted.end());
  double h = 0.0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    while (j < n && sorted[j] == sorted[i]) ++j;
    const double p = double(j - i) / double(n);
    h -= p * std::log2(p);
    i = j;
  }
  return h;
}

std::vector<int64_t> score_subset(int64_t n, int64_t k, uint64_t seed) {
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), int64_t(0));
  if (k >= n) return all;
  SplitMix64 rng{epoch_seed(seed, kSubsetStream)};
  // Partial Fisher–Yates: the first k positions of a uniform permutation.
  for (int64_t i = 0; i < k; ++i) std::swap(all[i], all[i + int64_t(rng.below(uint64_t(n - i)))]);
  all.resize(k);
  std::sort(all.begin(), all.end());
  return all;
}

std::vector<float> entropy_scores(const Dataset& dataset, const std::vector<int64_t>& indices) {
  XTRAIN_USAGE_CHECK(dataset.info().kind == "text", "data: xtrain.data.ordering.scorer=entropy needs text data, got ",
                     dataset.info().kind, " (xtrain.data.type=text)");
  std::vector<float> out;
  out.reserve(indices.size());
  constexpr size_t kChunk = 256;
  for (size_t begin = 0; begin < indices.size(); begin += kChunk) {
    const size_t end = std::min(indices.size(), begin + kChunk);
    const std::vector<int64_t> chunk(indices.begin() + begin, indices.begin() + end);
    const at::Tensor input = dataset.collate(chunk).input.contiguous();  // int64 [B, T]
    const int64_t T = input.size(1);
    const int64_t* p = input.data_ptr<int64_t>();
    for (size_t b = 0; b < chunk.size(); ++b) out.push_back(float(unigram_entropy_bits(p + b * T, T)));
  }
  return out;
}

DifficultyScores compute_scores(const Dataset& dataset, const ScoringRequest& r) {
  TORCH_CHECK(r.samples > 0 && r.batch_size > 0, "data: compute_scores needs samples and batch_size > 0");
  const int64_t count = std::min(r.samples, dataset.size());
  const std::string key = cache_key(dataset, r);
  DifficultyScores s;
  if (!r.cache_path.empty() && read_cache(r.cache_path, key, count, s)) {
    log::info("data ordering: ", count, " ", r.scorer, " scores read from ", r.cache_path);
    return s;
  }
  s.indices = score_subset(dataset.size(), count, r.seed);
  if (r.scorer == "entropy") {
    s.values = entropy_scores(dataset, s.indices);
  } else {
    TORCH_CHECK(r.scorer == "loss" && r.loss, "data: scorer \"", r.scorer, "\" has no implementation here");
    s.values.reserve(count);
    for (int64_t begin = 0; begin < count; begin += r.batch_size) {
      const int64_t end = std::min(count, begin + r.batch_size);
      const std::vector<int64_t> chunk(s.indices.begin() + begin, s.indices.begin() + end);
      const std::vector<float> v = r.loss(chunk);
      TORCH_CHECK(v.size() == chunk.size(), "data: the loss scorer returned ", v.size(), " scores for ", chunk.size(),
                  " samples");
      s.values.insert(s.values.end(), v.begin(), v.end());
    }
  }
  for (size_t i = 0; i < s.values.size(); ++i) {
    XTRAIN_USAGE_CHECK(std::isfinite(s.values[i]), "data: the ", r.scorer, " scorer gave sample ", s.indices[i],
                       " the score ", s.values[i], " (xtrain.data.ordering.scorer)");
  }
  if (!r.cache_path.empty() && r.write_cache) write_cache(r.cache_path, key, s);
  log::info("data ordering: scored ", count, " of ", dataset.size(), " samples by ", r.scorer,
            r.cache_path.empty() ? "" : " (cached in " + r.cache_path + ")");
  return s;
}

}  // namespace xtrain::data
