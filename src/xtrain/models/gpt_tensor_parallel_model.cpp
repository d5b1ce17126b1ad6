#include "xtrain/models/gpt_tensor_parallel_model.h"

#include "xtrain/base/error.h"
#include "xtrain/models/gpt_tensor_parallel.h"
#include "xtrain/parallel/tensor/mappings.h"
#include "xtrain/parallel/tensor/shard_spec.h"

namespace xtrain::models {

Model build_tensor_parallel_gpt(const ModelOptions& options, std::shared_ptr<comm::Communicator> tp) {
  auto gpt = TensorParallelGPT(options, tp);
  Model m;
  m.module = gpt.ptr();
  m.task = "lm";
  m.options = options;
  m.forward = [gpt = gpt.ptr(), tp](const at::Tensor& idx) {
    return parallel::tensor::gather_from_tensor_parallel(gpt->forward(idx), tp);
  };
  return m;
}

std::function<at::Tensor(const at::Tensor&, const at::Tensor&)> tensor_parallel_train_loss(const Model& model) {
  auto gpt = std::dynamic_pointer_cast<TensorParallelGPTImpl>(model.module);
  TORCH_INTERNAL_ASSERT(gpt, "tensor_parallel_train_loss: not a model of build_tensor_parallel_gpt");
  return [gpt](const at::Tensor& input, const at::Tensor& target) { return gpt->loss(gpt->forward(input), target); };
}

std::map<std::string, double> replicated_norm_weights(const torch::nn::Module& module, int64_t tp) {
  std::map<std::string, double> out;
  if (tp <= 1) return out;
  for (const auto& [name, spec] : parallel::tensor::shard_specs(module)) {
    if (spec.dim < 0) out[name] = 1.0 / static_cast<double>(tp);
  }
  return out;
}

}  // namespace xtrain::models
