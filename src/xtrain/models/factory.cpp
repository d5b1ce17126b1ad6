// build_model (asks the model registry) and the size formulas.
#include "xtrain/models/factory.h"

#include <unordered_set>

#include "xtrain/base/error.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/registry.h"

namespace xtrain::models {

Model build_model(const ModelOptions& o) {
  const ModelEntry& entry = find_model(o.type);
  Model m = entry.build(o);
  XTRAIN_USAGE_CHECK(m.module && m.forward, "models: the factory registered for xtrain.model.type \"", o.type,
                     "\" returned no module or no forward");
  if (m.task.empty()) m.task = entry.task;
  m.options = o;
  return m;
}

int64_t count_parameters(const torch::nn::Module& module) {
  std::unordered_set<const void*> seen;
  int64_t total = 0;
  for (const auto& p : module.parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) total += p.numel();
  }
  return total;
}

double gpt_flops_per_token(const ModelOptions& o) {
  const double L = static_cast<double>(o.layers), C = static_cast<double>(o.d_model);
  const double T = static_cast<double>(o.seq_len), V = static_cast<double>(o.vocab);
  const double r = static_cast<double>(gpt_mlp_ratio(o));
  // Per block: qkv 3C²+3C, proj C²+C, fc rC²+rC, proj rC²+C, two LayerNorms 4C (r = 4: 12C²+13C).
  const double N = L * ((4 + 2 * r) * C * C + (9 + r) * C) + 2 * C /* ln_f */ + V * C /* LM head */;
  return 6 * N + 12 * L * T * C;
}

}  // namespace xtrain::models
