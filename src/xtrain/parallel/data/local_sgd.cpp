// LocalSgd (local_sgd.h). One flat fp32 copy of the parameters per synchronisation: a single
// all-reduce of numel × 4 bytes (Gloo's ring sends 2(W-1)/W of it per rank), whatever the model's
// parameter count, instead of one per tensor.
#include "xtrain/parallel/data/local_sgd.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <map>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"

namespace xtrain::parallel {

LocalSgd::LocalSgd(const LocalSgdOptions& options, std::vector<at::Tensor> params,
                   std::shared_ptr<comm::Communicator> dp)
    : options_(options), params_(std::move(params)), dp_(std::move(dp)) {
  TORCH_INTERNAL_ASSERT(options_.enabled() && !params_.empty());
  for (const auto& p : params_) {
    XTRAIN_USAGE_CHECK(p.scalar_type() == at::kFloat, "local_sgd: parameters must be fp32 (the inner optimizer ",
                       "updates them in place), got ", p.scalar_type(), " (xtrain.local_sgd)");
    numel_ += p.numel();
  }
  at::Tensor flat = flat_params();
  if (dp_->distributed()) {
    dp_->broadcast(flat, 0);
    write_params(flat);
  }
  if (options_.outer_optimizer.type == "nesterov") {
    anchor_ = flat;
    momentum_ = at::zeros({numel_}, at::kFloat);
  }
}

at::Tensor LocalSgd::flat_params() const {
  std::vector<at::Tensor> parts;
  parts.reserve(params_.size());
  for (const auto& p : params_) parts.push_back(p.detach().reshape({-1}));
  return at::cat(parts).contiguous();
}

void LocalSgd::write_params(const at::Tensor& flat) {
  at::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& p : params_) {
    p.detach().copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

bool LocalSgd::after_step() {
  if (++steps_since_sync_ < options_.sync_every) return false;
  synchronise();
  return true;
}

void LocalSgd::synchronise() {
  at::NoGradGuard no_grad;
  at::Tensor mean = flat_params();
  if (dp_->distributed()) {
    dp_->all_reduce(mean, comm::ReduceOp::kSum);
    mean.div_(static_cast<double>(dp_->size()));
  }
  if (options_.outer_optimizer.type == "nesterov") {
    // torch.optim.SGD(nesterov=True, dampening=0) on the anchor with gradient delta:
    // buf = mu·buf + delta; anchor -= lr·(delta + mu·buf).
    const double lr = options_.outer_optimizer.lr, mu = options_.outer_optimizer.momentum;
    const at::Tensor delta = anchor_ - mean;
    at::Tensor update = delta;
    if (mu != 0.0) {
      momentum_.mul_(mu).add_(delta);
      update = delta + momentum_ * mu;
    }
    anchor_.sub_(update, lr);
    write_params(anchor_);
  } else {
    write_params(mean);
  }
  steps_since_sync_ = 0;
  ++syncs_;
}

void LocalSgd::restart() {
  steps_since_sync_ = 0;
  syncs_ = 0;
  if (!anchor_.defined()) return;
  anchor_ = flat_params();
  momentum_.zero_();
}

std::vector<std::pair<std::string, at::Tensor>> LocalSgd::state_tensors() const {
  at::Tensor counters = at::empty({2}, at::kLong);
  counters.data_ptr<int64_t>()[0] = steps_since_sync_;
  counters.data_ptr<int64_t>()[1] = syncs_;
  std::vector<std::pair<std::string, at::Tensor>> out = {{"counters", counters}};
  if (anchor_.defined()) {
    out.emplace_back("anchor", anchor_.clone());
    out.emplace_back("momentum", momentum_.clone());
  }
  return out;
}

void LocalSgd::load_state(const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  std::map<std::string, at::Tensor> by_name(tensors.begin(), tensors.end());
  const auto get = [&](const std::string& name) {
    auto it = by_name.find(name);
    XTRAIN_USAGE_CHECK(it != by_name.end(), "checkpoint: local_sgd.pt has no '", name, "': it was written with ",
                       "another xtrain.local_sgd.outer_optimizer.type (\"nesterov\" keeps an anchor and a momentum, ",
                       "\"average\" does not); resume with the type it was written with");
    return it->second;
  };
  const at::Tensor counters = get("counters").to(at::kLong).contiguous();
  XTRAIN_USAGE_CHECK(counters.numel() == 2, "checkpoint: local_sgd.pt 'counters' has ", counters.numel(),
                     " elements, expected 2");
  steps_since_sync_ = counters.data_ptr<int64_t>()[0];
  syncs_ = counters.data_ptr<int64_t>()[1];
  if (!anchor_.defined()) return;
  using Slot = std::pair<const char*, at::Tensor*>;
  for (const auto& [name, dst] : {Slot{"anchor", &anchor_}, Slot{"momentum", &momentum_}}) {
    const at::Tensor t = get(name);
    XTRAIN_USAGE_CHECK(t.numel() == numel_, "checkpoint: local_sgd.pt '", name, "' has ", t.numel(),
                       " elements, the model has ", numel_, " parameters");
    dst->copy_(t.reshape({-1}));
  }
}

}  // namespace xtrain::parallel
