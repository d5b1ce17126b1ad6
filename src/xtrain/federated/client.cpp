#include "xtrain/federated/client.h"

#include <ATen/Functions.h>
#include <torch/nn/module.h>

#include "xtrain/engine/engine.h"

namespace xtrain::federated {

FlatParams flat_layout(const torch::nn::Module& module) {
  FlatParams l;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    if (!p.value().requires_grad()) continue;
    l.names.push_back(p.key());
    l.shapes.push_back(p.value().sizes().vec());
    l.offsets.push_back(l.numel);
    l.numel += p.value().numel();
  }
  return l;
}

at::Tensor flatten(const torch::nn::Module& module, const FlatParams& layout) {
  at::NoGradGuard no_grad;
  at::Tensor flat = at::empty({layout.numel}, at::kFloat);
  const auto params = module.named_parameters(/*recurse=*/true);
  for (size_t i = 0; i < layout.names.size(); ++i) {
    const at::Tensor& p = params[layout.names[i]];
    flat.narrow(0, layout.offsets[i], p.numel()).copy_(p.detach().reshape({-1}));
  }
  return flat;
}

void load_flat(torch::nn::Module& module, const FlatParams& layout, const at::Tensor& flat) {
  at::NoGradGuard no_grad;
  auto params = module.named_parameters(/*recurse=*/true);
  for (size_t i = 0; i < layout.names.size(); ++i) {
    at::Tensor& p = params[layout.names[i]];
    const int64_t n = p.numel();
    p.set_data(flat.narrow(0, layout.offsets[i], n).view(layout.shapes[i]).to(at::kFloat).clone());
  }
}

data::Batch SubsetDataset::collate(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> mapped(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) mapped[i] = indices_.at(static_cast<size_t>(indices[i]));
  return base_->collate(mapped);
}

Client make_client(const Setup& s, int64_t id, std::vector<int64_t> indices) {
  Client c;
  c.id = id;
  c.data = std::make_shared<SubsetDataset>(s.data.train, std::move(indices));
  c.sampler = c.data->make_sampler(static_cast<uint64_t>(s.config.trainer.seed + id), 0, 1);
  return c;
}

namespace {

// The run's loss (setup.cpp's make_engine: xtrain.loss on the model's output), plus FedProx's term.
Engine::LossFn local_loss(const Setup& s, const FlatParams& layout, const at::Tensor& global, double prox_mu) {
  auto forward = s.model.forward;
  auto loss = s.loss;
  if (prox_mu <= 0.0) return [forward, loss](const data::Batch& b) { return loss(forward(b.input), b.target); };
  // The anchor w_global per parameter (constants: the gradient of the term is mu (w - w_global)).
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
  auto params = s.model.module->named_parameters(/*recurse=*/true);
  for (size_t i = 0; i < layout.names.size(); ++i) {
    at::Tensor anchor = global.narrow(0, layout.offsets[i], params[layout.names[i]].numel()).view(layout.shapes[i]);
    pairs.emplace_back(params[layout.names[i]], anchor);
  }
  return [forward, loss, pairs, prox_mu](const data::Batch& b) {
    at::Tensor out = loss(forward(b.input), b.target);
    at::Tensor prox = at::zeros({}, out.options());
    for (const auto& [w, anchor] : pairs) prox = prox + (w - anchor.to(w.scalar_type())).pow(2).sum().to(out.scalar_type());
    return out + 0.5 * prox_mu * prox;
  };
}

}  // namespace

LocalResult train_client(Setup& s, Client& client, const FlatParams& layout, const at::Tensor& global,
                         const std::vector<double>& lrs, double prox_mu) {
  load_flat(*s.model.module, layout, global);
  // Built after load_flat: the loss's FedProx term holds the parameters the Engine then binds (set_data
  // keeps each parameter's identity).
  Engine engine(s.model.module, local_loss(s, layout, global, prox_mu), s.config);
  engine.train(true);
  const int64_t micro = *s.config.engine.train_micro_batch_size_per_gpu;
  LocalResult r;
  for (double lr : lrs) {
    engine.set_lr_override(lr);
    do {
      const data::Batch batch = client.data->collate(client.sampler->next(micro));
      engine.backward(engine.forward(batch));
    } while (!engine.step());
    r.step_losses.push_back(engine.last_step().loss);
  }
  // In float64: the difference of two fp32 vectors is exact there, so one client's FedAvg step lands
  // on its own weights bit for bit.
  r.update = flatten(*s.model.module, layout).to(at::kDouble) - global.to(at::kDouble);
  return r;
}

}  // namespace xtrain::federated
