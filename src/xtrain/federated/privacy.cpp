#include "xtrain/federated/privacy.h"

#include <ATen/Functions.h>

#include <cmath>

namespace xtrain::federated {

double clip_update(at::Tensor& update, double clip) {
  const double norm = update.to(at::kDouble).norm().item<double>();
  if (norm > clip) update.mul_(clip / norm);
  return norm;
}

double rdp_epsilon(double sigma, int64_t rounds, double delta) {
  const double r = static_cast<double>(rounds), l = std::log(1.0 / delta);
  return r / (2.0 * sigma * sigma) + std::sqrt(2.0 * r * l) / sigma;
}

double rdp_best_order(double sigma, int64_t rounds, double delta) {
  return 1.0 + sigma * std::sqrt(2.0 * std::log(1.0 / delta) / static_cast<double>(rounds));
}

}  // namespace xtrain::federated
