#include "xtrain/zero/replicated.h"

#include <ATen/Functions.h>

#include <map>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/parallel/data/bucket_reducer.h"
#include "xtrain/zero/shard_io.h"
#include "xtrain/zero/whole_state_io.h"

namespace xtrain::zero {

ReplicatedStrategy::ReplicatedStrategy(NamedParams params, const StrategyOptions& options,
                                       std::shared_ptr<comm::Communicator> dp)
    : options_(options), dp_(std::move(dp)), named_(std::move(params)) {
  const auto group = optim::group_indices(named_, options_.param_group);
  layout_ = make_layout(named_, group, /*world_size=*/1, options_.alignment);
  norm_ranges_ = weighted_ranges(layout_, options_.norm_weights);
  allocate(named_);
  segments_ = layout_.segments(0, layout_.numel);
  optimizer_ = optim::make_optimizer(options_.optimizer);
  optimizer_->init_state(layout_.numel);
}

ReplicatedStrategy::~ReplicatedStrategy() = default;

// The fp32 master comes from the parameters' values as given; then rank 0's values are broadcast,
// the parameters become views of a buffer of the model's dtype, and the reducer hooks are attached
// (after the views: a dtype change replaces the AccumulateGrad node the hooks live on).
void ReplicatedStrategy::allocate(const NamedParams& params) {
  at::NoGradGuard no_grad;
  const auto dtype = options_.param_dtype;
  master_ = at::zeros({layout_.numel}, at::kFloat);
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& slot = layout_.slots[i];
    master_.narrow(0, slot.offset, slot.numel).copy_(params[i].second.reshape({-1}));
  }
  if (dp_->distributed()) dp_->broadcast(master_, 0);
  model_params_ = dtype == at::kFloat ? master_ : at::zeros({layout_.numel}, dtype);
  for (size_t i = 0; i < params.size(); ++i) {  // start from the (broadcast) master values
    const auto& slot = layout_.slots[i];
    params[i].second.set_data(master_.narrow(0, slot.offset, slot.numel).view(slot.shape).clone());
  }
  bind_params(params, layout_, model_params_);
  grads_ = at::zeros({layout_.numel}, dtype);
  bind_grads(params, layout_, grads_);
  const bool mixed = dtype != at::kFloat;
  const int64_t gas = options_.gradient_accumulation_steps;
  if (mixed && options_.grad_accum_dtype == at::kFloat && (gas > 1 || dp_->distributed())) {
    grad_acc_ = at::zeros({layout_.numel}, at::kFloat);
  }
  if (!dp_->distributed()) return;
  std::vector<parallel::ReducerParam> rp;
  for (size_t i = 0; i < params.size(); ++i) rp.push_back({params[i].second, layout_.slots[i].offset, layout_.slots[i].numel});
  parallel::ReducerOptions ro;
  ro.bucket_size = options_.zero.reduce_bucket_size;
  ro.overlap = options_.zero.overlap_comm != 0;  // stage 0: DeepSpeed overlaps unless told not to
  ro.prescale_gradients = options_.prescale_gradients;
  ro.gradient_predivide_factor = options_.gradient_predivide_factor;
  ro.communication_dtype = options_.communication_dtype;
  parallel::BucketReducer::BucketReady on_ready;
  if (grad_acc_.defined()) {  // bf16/fp16 gradients join the fp32 buffer just before the bucket is sent
    on_ready = [this](int64_t begin, int64_t end) {
      at::NoGradGuard guard;
      grad_acc_.narrow(0, begin, end - begin).add_(grads_.narrow(0, begin, end - begin));
      grads_.narrow(0, begin, end - begin).zero_();
    };
  }
  reducer_ = std::make_unique<parallel::BucketReducer>(dp_, std::move(rp), reduced_grads(), ro, std::move(on_ready));
}

std::string ReplicatedStrategy::describe() const {
  return dp_->distributed() ? c10::str("ZeRO stage 0: replicated on ", dp_->size(), " data-parallel ranks, gradients ",
                                       "all-reduced in ", reducer_->buckets().size(), " buckets")
                            : "ZeRO stage 0 (single rank)";
}

void ReplicatedStrategy::before_backward(bool boundary) {
  if (reducer_) reducer_->set_boundary(boundary);
}

// Off the boundary, low-precision gradients move into the fp32 buffer after every micro-batch; on
// it, the reducer's bucket hooks do that (distributed) or we do it here (single rank).
void ReplicatedStrategy::after_backward(bool boundary) {
  if (!grad_acc_.defined() || (boundary && reducer_)) return;
  at::NoGradGuard no_grad;
  grad_acc_.add_(grads_);
  grads_.zero_();
}

void ReplicatedStrategy::reduce() {
  if (reducer_) reducer_->finish();
}

const at::Tensor& ReplicatedStrategy::reduced_grads() const { return grad_acc_.defined() ? grad_acc_ : grads_; }

double ReplicatedStrategy::grad_norm_squared() {
  // Every rank holds the same (reduced) gradients: no communication needed.
  return weighted_norm_squared(reduced_grads(), norm_ranges_);
}

std::vector<at::Tensor> ReplicatedStrategy::unreduced_gradient(const std::string& name) {
  XTRAIN_USAGE_CHECK(!reducer_ || options_.zero.overlap_comm == 0, "zero: stage 0 with overlap_comm reduces during backward; ",
                     name, " needs zero_optimization.overlap_comm = false");
  const auto& slot = layout_.slot(name);
  std::vector<at::Tensor> out = {grads_.narrow(0, slot.offset, slot.numel)};
  if (grad_acc_.defined()) out.push_back(grad_acc_.narrow(0, slot.offset, slot.numel));
  return out;
}

void ReplicatedStrategy::step(const StepHyper& h) {
  optim::StepInputs in;
  in.params = master_;
  in.grads = reduced_grads();
  in.grad_scale = h.grad_scale;
  if (options_.param_dtype != at::kFloat) in.params_lowp = model_params_;
  in.segments = &segments_;
  in.groups = h.groups;
  in.beta1_override = h.beta1_override;
  in.beta2_override = h.beta2_override;
  in.closure = h.closure;
  in.loss = h.loss;
  at::NoGradGuard no_grad;
  optimizer_->step(in);
}

void ReplicatedStrategy::zero_grads() {
  grads_.zero_();
  if (grad_acc_.defined()) grad_acc_.zero_();
}

std::string ReplicatedStrategy::optimizer_name() const { return optimizer_->name(); }
int64_t ReplicatedStrategy::optimizer_step_count() const { return optimizer_->step_count(); }
void ReplicatedStrategy::set_optimizer_step_count(int64_t n) { optimizer_->set_step_count(n); }

MemoryReport ReplicatedStrategy::memory() const {
  MemoryReport r;
  r.param_bytes = model_params_.numel() * model_params_.element_size();
  r.grad_bytes = grads_.numel() * grads_.element_size() + (grad_acc_.defined() ? grad_acc_.numel() * 4 : 0);
  r.master_bytes = options_.param_dtype == at::kFloat ? 0 : master_.numel() * 4;
  for (auto& [name, t] : optimizer_->state()) r.optimizer_bytes += t.numel() * t.element_size();
  return r;
}

// Rank 0 writes the whole (replicated) state: model.pt holds the fp32 master by parameter name,
// optimizer.pt "<state>/<param>"; other ranks write nothing.
void ReplicatedStrategy::save(checkpoint::CheckpointWriter& writer) const {
  if (dp_->rank() != 0) return;
  checkpoint::NamedTensors model, state;
  for (const auto& slot : layout_.slots) {
    model.emplace_back(slot.name, master_.narrow(0, slot.offset, slot.numel).view(slot.shape).clone());
  }
  const NamedBuffers whole = optimizer_->state();
  if (is_whole_state(whole, master_.numel())) {  // 8-bit state: as it is, in one piece
    writer.write_tensors("model.pt", model);
    save_whole_state(writer, 0, whole_layout(), whole);
    return;
  }
  for (const auto& [state_name, flat] : optimizer_->state()) {
    for (const auto& slot : layout_.slots) {
      state.emplace_back(state_name + "/" + slot.name, flat.narrow(0, slot.offset, slot.numel).view(slot.shape).clone());
    }
  }
  writer.write_tensors("model.pt", model);
  writer.write_tensors("optimizer.pt", state);
}

namespace {
void copy_checked(const std::map<std::string, at::Tensor>& from, const std::string& key, const at::Tensor& to,
                  const std::string& file) {
  auto it = from.find(key);
  XTRAIN_USAGE_CHECK(it != from.end(), "checkpoint: ", file, " has no tensor '", key,
                     "' (was it written by a different model?)");
  XTRAIN_USAGE_CHECK(it->second.numel() == to.numel(), "checkpoint: ", file, ": '", key, "' has shape ",
                     it->second.sizes(), ", the model has ", to.sizes());
  to.copy_(it->second.reshape(to.sizes()));
}
}  // namespace

// The 8-bit state's layout (whole_state_io.h): one "rank" holding every parameter at its offset.
at::Tensor ReplicatedStrategy::whole_layout() const {
  std::vector<Fragment> frags;
  for (size_t i = 0; i < layout_.slots.size(); ++i) {
    const auto& slot = layout_.slots[i];
    frags.push_back({static_cast<int>(i), 0, slot.numel, slot.offset});
  }
  return state_layout(1, master_.numel(), frags);
}

// Any checkpoint: stage 0's files, or a sharded one from any stage and world size (consolidated).
void ReplicatedStrategy::load(const checkpoint::CheckpointReader& reader, bool load_optimizer) {
  at::NoGradGuard no_grad;
  const auto full = consolidate(reader, load_optimizer);
  std::map<std::string, at::Tensor> model(full.model.begin(), full.model.end());
  for (const auto& slot : layout_.slots) copy_checked(model, slot.name, master_.narrow(0, slot.offset, slot.numel), "model.pt");
  if (!options_.zero.load_from_fp32_weights) round_master({{"master", master_}}, options_.param_dtype);
  if (options_.param_dtype != at::kFloat) model_params_.copy_(master_);
  zero_grads();
  if (!load_optimizer) return;
  const NamedBuffers whole = optimizer_->state();
  if (is_whole_state(whole, master_.numel())) {
    load_whole_state(reader, 0, whole_layout(), whole);
    return;
  }
  refuse_whole_state_checkpoint(reader);
  std::map<std::string, at::Tensor> state(full.optimizer.begin(), full.optimizer.end());
  for (const auto& [state_name, flat] : optimizer_->state()) {
    for (const auto& slot : layout_.slots) {
      copy_checked(state, state_name + "/" + slot.name, flat.narrow(0, slot.offset, slot.numel), "optimizer.pt");
    }
  }
}

}  // namespace xtrain::zero
