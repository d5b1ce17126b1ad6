// build_model and the size formulas.
#include "xtrain/models/factory.h"

#include <unordered_set>

#include "xtrain/base/error.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/mlp_classifier.h"
#include "xtrain/models/resnet.h"

namespace xtrain::models {

Model build_model(const ModelOptions& o) {
  if (o.type == "gpt") {
    auto gpt = GPT(o).ptr();
    return {gpt, [gpt](const at::Tensor& idx) { return gpt->forward(idx); }, "lm", o};
  }
  if (o.type == "resnet18" || o.type == "mlp") {
    XTRAIN_USAGE_CHECK(o.num_classes > 0, "models: ", o.type,
                       " needs xtrain.model.num_classes > 0 (set it or use an image dataset), got ", o.num_classes);
  }
  if (o.type == "resnet18") {
    auto resnet = ResNet18(o.num_classes).ptr();
    return {resnet, [resnet](const at::Tensor& x) { return resnet->forward(x); }, "classify", o};
  }
  if (o.type == "mlp") {
    XTRAIN_USAGE_CHECK(o.in_features > 0, "models: mlp needs xtrain.model.in_features > 0 (set it or use an image "
                       "dataset), got ", o.in_features);
    auto mlp = MlpClassifier(o.in_features, o.hidden, o.num_classes, o.dropout).ptr();
    return {mlp, [mlp](const at::Tensor& x) { return mlp->forward(x); }, "classify", o};
  }
  XTRAIN_USAGE_ERROR("models: xtrain.model.type must be gpt, resnet18 or mlp, got \"", o.type, "\"");
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
  // Per block: qkv 3C²+3C, proj C²+C, fc 4C²+4C, proj 4C²+C, two LayerNorms 4C.
  const double N = L * (12 * C * C + 13 * C) + 2 * C /* ln_f */ + V * C /* LM head */;
  return 6 * N + 12 * L * T * C;
}

}  // namespace xtrain::models
