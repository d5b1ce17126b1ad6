#include "xtrain/federated/split.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "xtrain/base/error.h"
#include "xtrain/data/dataset.h"
#include "xtrain/data/sampler.h"
#include "xtrain/data/splitmix64.h"

namespace xtrain::federated {

std::string SplitSpec::describe() const {
  switch (kind) {
    case Kind::iid: return "iid";
    case Kind::contiguous: return "contiguous";
    case Kind::dirichlet: return c10::str("dirichlet(alpha ", alpha, ")");
  }
  return "?";
}

SplitSpec parse_split(const std::string& text) {
  SplitSpec s;
  if (text == "iid") return s;
  if (text == "contiguous") {
    s.kind = SplitSpec::Kind::contiguous;
    return s;
  }
  const std::string prefix = "dirichlet:";
  if (text.rfind(prefix, 0) == 0) {
    const std::string a = text.substr(prefix.size());
    size_t used = 0;
    double alpha = 0.0;
    try {
      alpha = std::stod(a, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    XTRAIN_USAGE_CHECK(used == a.size() && used > 0 && std::isfinite(alpha) && alpha > 0, "--split ", text,
                       ": the Dirichlet concentration must be a number > 0 (e.g. --split dirichlet:0.5)");
    s.kind = SplitSpec::Kind::dirichlet;
    s.alpha = alpha;
    return s;
  }
  XTRAIN_USAGE_ERROR("--split ", text, ": want iid, dirichlet:ALPHA (e.g. dirichlet:0.5, labelled data) or contiguous");
}

ClientIndices split_iid(int64_t n, int64_t clients, uint64_t seed) {
  const std::vector<int64_t> order = clients == 1 ? std::vector<int64_t>{} : data::shuffled_order(n, seed, 0);
  ClientIndices out(clients);
  for (int64_t k = 0; k < clients; ++k) {
    const int64_t b = k * n / clients, e = (k + 1) * n / clients;
    for (int64_t i = b; i < e; ++i) out[k].push_back(clients == 1 ? i : order[i]);
    std::sort(out[k].begin(), out[k].end());
  }
  return out;
}

ClientIndices split_contiguous(int64_t n, int64_t clients) {
  ClientIndices out(clients);
  for (int64_t k = 0; k < clients; ++k) {
    for (int64_t i = k * n / clients; i < (k + 1) * n / clients; ++i) out[k].push_back(i);
  }
  return out;
}

namespace {

double uniform_open(uint64_t& state) {  // (0, 1)
  data::SplitMix64 r{state};
  double u = 0.0;
  while (u == 0.0) u = r.uniform();
  state = r.state;
  return u;
}

double normal_draw(uint64_t& state) {  // Box-Muller, one of the pair
  const double u1 = uniform_open(state), u2 = uniform_open(state);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace

double gamma_draw(double shape, uint64_t& state) {
  if (shape < 1.0) {  // Gamma(a) = Gamma(a + 1) U^(1/a)
    const double g = gamma_draw(shape + 1.0, state);
    return g * std::pow(uniform_open(state), 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = normal_draw(state);
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = uniform_open(state);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

ClientIndices split_dirichlet(const std::vector<int64_t>& labels, int64_t classes, int64_t clients, double alpha,
                              uint64_t seed) {
  ClientIndices out(clients);
  uint64_t state = data::epoch_seed(seed, 1);
  std::vector<std::vector<int64_t>> by_class(classes);
  for (size_t i = 0; i < labels.size(); ++i) by_class[labels[i]].push_back(static_cast<int64_t>(i));
  for (int64_t c = 0; c < classes; ++c) {
    auto& members = by_class[c];
    const auto order = data::shuffled_order(static_cast<int64_t>(members.size()), seed + 1 + c, 0);
    std::vector<double> share(clients);
    double total = 0.0;
    for (auto& s : share) total += (s = gamma_draw(alpha, state));
    if (!(total > 0.0)) {  // every draw underflowed (tiny alpha): the class goes to one client
      std::fill(share.begin(), share.end(), 0.0);
      share[data::SplitMix64{state}.below(clients)] = total = 1.0;
    }
    const auto m = static_cast<int64_t>(members.size());
    double cumulative = 0.0;
    int64_t begin = 0;
    for (int64_t k = 0; k < clients; ++k) {
      cumulative += share[k] / total;
      const int64_t end = k + 1 == clients ? m : std::min<int64_t>(m, std::llround(cumulative * m));
      for (int64_t i = begin; i < end; ++i) out[k].push_back(members[order[i]]);
      begin = std::max(begin, end);
    }
  }
  for (auto& v : out) std::sort(v.begin(), v.end());
  return out;
}

std::vector<int64_t> dataset_labels(const data::Dataset& dataset, int64_t* classes) {
  std::vector<int64_t> labels;
  const int64_t n = dataset.size();
  const int64_t chunk = 4096;
  for (int64_t b = 0; b < n; b += chunk) {
    std::vector<int64_t> idx(std::min(chunk, n - b));
    std::iota(idx.begin(), idx.end(), b);
    const at::Tensor t = dataset.collate(idx).target;
    XTRAIN_USAGE_CHECK(t.dim() == 1 && !at::isFloatingType(t.scalar_type()),
                       "--split dirichlet needs labelled data (one class per sample, e.g. fashion_mnist); this "
                       "dataset's targets are ", t.sizes(), ": use --split iid or contiguous");
    const at::Tensor l = t.to(at::kLong).contiguous();
    labels.insert(labels.end(), l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
  }
  int64_t k = dataset.info().num_classes;
  for (int64_t l : labels) k = std::max(k, l + 1);
  *classes = k;
  return labels;
}

ClientIndices split_dataset(const data::Dataset& dataset, const SplitSpec& spec, int64_t clients, uint64_t seed) {
  switch (spec.kind) {
    case SplitSpec::Kind::iid: return split_iid(dataset.size(), clients, seed);
    case SplitSpec::Kind::contiguous: return split_contiguous(dataset.size(), clients);
    case SplitSpec::Kind::dirichlet: {
      int64_t classes = 0;
      const auto labels = dataset_labels(dataset, &classes);
      return split_dirichlet(labels, classes, clients, spec.alpha, seed);
    }
  }
  return {};
}

}  // namespace xtrain::federated
