// tensor_parallel.size > 1 as a models::Model: a TensorParallelGPT (gpt_tensor_parallel.h) whose
// Model::forward gathers the vocabulary-split logits over the group (evaluation, sampling), while
// training uses the split logits and the vocabulary-parallel loss (train_loss). The norm weights
// say how often each parameter is held whole across the group.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "xtrain/models/factory.h"

namespace xtrain::comm {
class Communicator;
}

namespace xtrain::models {


// UsageError as TensorParallelGPTImpl's constructor.
Model build_tensor_parallel_gpt(const ModelOptions& options, std::shared_ptr<comm::Communicator> tp);

// The training loss of a model build_tensor_parallel_gpt made: its split logits of `input` and the
// vocabulary-parallel cross-entropy against `target` (equal on every rank of the group).
std::function<at::Tensor(const at::Tensor& input, const at::Tensor& target)> tensor_parallel_train_loss(
    const Model& model);

// The gradient-norm weight of each parameter a tensor-parallel module holds whole on every rank:
// 1/tp (the split ones are absent: weight 1). Empty for tp <= 1.
std::map<std::string, double> replicated_norm_weights(const torch::nn::Module& module, int64_t tp);

}  // namespace xtrain::models
