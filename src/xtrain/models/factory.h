// build_model: ModelOptions -> a plain torch::nn::Module plus its forward as a callable and its
// task, so the engine trains any module without knowing its class. Also the closed-form sizes the
// monitor needs: parameter count and GPT training FLOPs per token (for MFU).
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>

#include "xtrain/models/options.h"

namespace xtrain::models {

struct Model {
  std::shared_ptr<torch::nn::Module> module;
  std::function<at::Tensor(const at::Tensor& input)> forward;  // lm: int64 [B, T] -> [B, T, V]
  std::string task;                                             // "lm" | "classify" ([B, ...] -> [B, classes])
  ModelOptions options;                                         // what it was built from
};

// The model registered as options.type (models/registry.h: gpt -> GPT ("lm"); resnet18 -> ResNet18,
// mlp -> MlpClassifier ("classify"); or a plugin's). Image models need num_classes > 0 (and mlp
// in_features > 0), which the CLI fills from the dataset: UsageError otherwise, and for an unknown
// type (naming the closest registered one). Deterministic given torch::manual_seed.
Model build_model(const ModelOptions& options);

// Distinct parameters (a tensor shared by two names counts once).
int64_t count_parameters(const torch::nn::Module& module);

// Training FLOPs per token, PaLM's formula (Chowdhery et al. 2022, appendix B; Kaplan et al. 2020
// §2.1 without the attention factor): 6·N + 12·L·T·C, where N counts the parameters that take part
// in matmuls: all except the embeddings, plus the LM head (V·C, tied or not). Attention over the
// full T (the causal mask's half is not subtracted, as in PaLM and nanoGPT's MFU).
double gpt_flops_per_token(const ModelOptions& options);

}  // namespace xtrain::models
