#include "xtrain/zero/grad_path.h"

#include <ATen/Functions.h>

#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/parallel/data/bucket_plan.h"
#include "xtrain/zero/shard_ops.h"

namespace xtrain::zero {

ShardReduce shard_reduce(const StrategyOptions& o, const comm::Communicator& dp) {
  ShardReduce r;
  r.dtype = o.param_dtype == at::kFloat || o.grad_accum_dtype == at::kFloat ? at::kFloat : o.param_dtype;
  if (dp.distributed()) {  // one rank communicates nothing: no scaling, no cast
    const auto scaling = parallel::gradient_scaling(dp.size(), o.prescale_gradients, o.gradient_predivide_factor);
    r.options = {o.zero.reduce_scatter, o.communication_dtype, scaling.pre, scaling.post};
  }
  r.post_after = r.options.post_after(r.dtype);
  return r;
}

parallel::BucketCollective unit_collective(comm::Communicator& dp, const ShardLayout& layout, const ShardReduce& reduce,
                                           std::vector<at::Tensor>& staging, const at::Tensor& part_grad,
                                           std::function<size_t(int)> unit_of) {
  return [&dp, &layout, reduce, &staging, part_grad, unit_of](int b) -> parallel::BucketDone {
    const size_t u = unit_of(b);
    const auto& unit = layout.units[u];
    if (!staging[u].defined()) staging[u] = at::zeros({unit.numel}, reduce.dtype);  // no gradient arrived
    auto reduction = std::make_shared<UnitReduction>(dp, staging[u], reduce.options);
    staging[u] = at::Tensor();
    return [reduction, own = part_grad.narrow(0, unit.local, unit.shard)]() mutable { own.add_(reduction->wait()); };
  };
}

bool stage_gradient(const ShardLayout& layout, int i, const at::Tensor& param, std::vector<at::Tensor>& staging,
                    at::ScalarType dtype) {
  const at::Tensor g = param.grad();
  if (!g.defined()) return false;
  const int u = layout.unit_of_slot[i];
  const auto& unit = layout.units[u];
  if (!staging[u].defined()) staging[u] = at::zeros({unit.numel}, dtype);
  const auto& s = layout.flat.slots[i];
  staging[u].narrow(0, s.offset - unit.begin, s.numel).copy_(g.reshape({-1}));
  param.mutable_grad() = at::Tensor();
  return true;
}

ShardGradients::ShardGradients(const NamedParams& named, const ShardLayout& layout, const StrategyOptions& options,
                               std::shared_ptr<comm::Communicator> dp)
    : named_(named), layout_(layout), options_(options), dp_(std::move(dp)), reduce_(shard_reduce(options, *dp_)) {
  used_.assign(named_.size(), 0);
}

void ShardGradients::reduce() {
  at::NoGradGuard no_grad;
  if (!options_.zero.ignore_unused_parameters) check_unused();
  reduce_buckets();
  if (reduce_.post_after != 1.0) part_grad_.mul_(reduce_.post_after);
}

void ShardGradients::zero() {
  std::fill(used_.begin(), used_.end(), 0);
  part_grad_.zero_();
}

bool ShardGradients::note_used(int i) {
  if (!named_[i].second.grad().defined()) return false;
  used_[i] = 1;
  return true;
}

// DeepSpeed asserts when a parameter had no gradient (stage_1_and_2, with ignore_unused_parameters
// false). Every rank learns how many were unused anywhere, so all fail together rather than leave
// the others waiting in the next collective.
void ShardGradients::check_unused() {
  std::string names;
  int64_t unused = 0;
  for (size_t i = 0; i < named_.size(); ++i) {
    if (used_[i]) continue;
    if (++unused <= 5) names += (names.empty() ? "" : ", ") + named_[i].first;
  }
  const double total = comm::all_reduce_sum(*dp_, static_cast<double>(unused));
  std::fill(used_.begin(), used_.end(), 0);
  if (total == 0) return;
  const std::string what = unused ? c10::str(unused, " parameter(s) got no gradient in this step on rank ", dp_->rank(),
                                             ": ", names, unused > 5 ? ", ..." : "")
                                  : std::string("a parameter got no gradient in this step on another rank");
  XTRAIN_USAGE_ERROR("zero: ", what, " (zero_optimization.ignore_unused_parameters is false); use them in the loss, ",
                     "freeze them (requires_grad false) or set ignore_unused_parameters to true");
}

namespace {

std::vector<parallel::ReducerParam> reducer_params(const NamedParams& named, const FlatLayout& flat) {
  std::vector<parallel::ReducerParam> out;
  for (size_t i = 0; i < named.size(); ++i) out.push_back({named[i].second, flat.slots[i].offset, flat.slots[i].numel});
  return out;
}

// Stage 1: a full gradient buffer the parameters' .grad are views of (plus, in mixed precision, an
// accumulation buffer of the reduce dtype), reduced in place at the boundary as one bucket; the
// whole model is one unit, so this rank's reduced shard is a contiguous slice of it. The hooks only
// note which parameters got a gradient (none with ignore_unused_parameters).
class BoundaryGradients : public ShardGradients {
 public:
  BoundaryGradients(const NamedParams& named, const ShardLayout& layout, const StrategyOptions& options,
                    std::shared_ptr<comm::Communicator> dp)
      : ShardGradients(named, layout, options, std::move(dp)) {
    const auto dtype = options_.param_dtype;
    grads_ = at::zeros({layout_.flat.numel}, dtype);
    bind_grads(named_, layout_.flat, grads_);
    if (reduce_.dtype != dtype) grad_acc_ = at::zeros({layout_.flat.numel}, reduce_.dtype);
    const auto& src = reduced();
    part_grad_ = src.narrow(0, layout_.owned_begin(0, dp_->rank()), layout_.units[0].shard);  // reduced in place
    parallel::CollectiveOptions co;
    co.overlap = false;  // the one bucket goes at reduce()
    const bool track = !options_.zero.ignore_unused_parameters;
    co.buckets = {{0, layout_.flat.numel, {}}};
    for (size_t i = 0; track && i < named_.size(); ++i) co.buckets[0].params.push_back(static_cast<int>(i));
    co.on_grad = [this](int i, bool /*again*/) { return note_used(i); };
    reducer_ = std::make_unique<parallel::BucketReducer>(track ? reducer_params(named_, layout_.flat)
                                                               : std::vector<parallel::ReducerParam>{},
                                                         std::move(co), [this](int) -> parallel::BucketDone {
      reduce_in_place(*dp_, reduced(), reduce_.options, comm::Communicator::kRingPieceElements);
      return nullptr;
    });
  }
  std::string what() const override { return ""; }
  void before_backward() override { reducer_->set_boundary(true); }
  void after_backward() override {
    if (!grad_acc_.defined()) return;
    at::NoGradGuard no_grad;  // mixed precision: fp32 accumulation after every micro-batch
    grad_acc_.add_(grads_);
    grads_.zero_();
  }
  std::vector<at::Tensor> unreduced(const ParamSlot& slot) const override {
    std::vector<at::Tensor> out = {grads_.narrow(0, slot.offset, slot.numel)};
    if (grad_acc_.defined()) out.push_back(grad_acc_.narrow(0, slot.offset, slot.numel));
    return out;
  }
  void zero() override {
    ShardGradients::zero();
    grads_.zero_();
    if (grad_acc_.defined()) grad_acc_.zero_();
  }
  int64_t bytes() const override { return tensor_bytes(grads_) + tensor_bytes(grad_acc_); }

 private:
  void reduce_buckets() override { reducer_->finish(); }
  const at::Tensor& reduced() const { return grad_acc_.defined() ? grad_acc_ : grads_; }

  at::Tensor grads_;     // the parameters' .grad (full, the model's dtype)
  at::Tensor grad_acc_;  // mixed precision: full buffer of the reduce dtype
  std::unique_ptr<parallel::BucketReducer> reducer_;  // last: destroyed first
};

// Stage 2: each unit's gradients move, as autograd produces them, into a staging buffer that is
// reduced asynchronously (overlapped with the rest of backward, every micro-batch, as DeepSpeed
// does) and added to this rank's shard; the parameters' .grad are released at once, so no full
// gradient exists. Units launch in reverse layout order (autograd's): bucket b is unit n-1-b.
class BucketedGradients : public ShardGradients {
 public:
  BucketedGradients(const NamedParams& named, const ShardLayout& layout, const StrategyOptions& options,
                    std::shared_ptr<comm::Communicator> dp)
      : ShardGradients(named, layout, options, std::move(dp)) {
    part_grad_ = at::zeros({layout_.shard_numel()}, reduce_.dtype);
    const size_t n = layout_.units.size();
    staging_.resize(n);
    parallel::CollectiveOptions co;
    for (size_t b = 0; b < n; ++b) {
      const auto& unit = layout_.units[n - 1 - b];
      co.buckets.push_back({unit.begin, unit.begin + unit.numel, {}});
      for (int i = unit.first_slot; i < unit.end_slot; ++i) co.buckets.back().params.push_back(i);
    }
    co.max_in_flight = options_.zero.overlap_comm > 0 ? 2 : 0;  // overlap: two buckets in flight bound the staging
    co.on_grad = [this](int i, bool again) { return stage(i, again); };
    reducer_ = std::make_unique<parallel::BucketReducer>(
        reducer_params(named_, layout_.flat), std::move(co),
        unit_collective(*dp_, layout_, reduce_, staging_, part_grad_, [n](int b) { return n - 1 - b; }));
  }
  std::string what() const override { return " and gradients"; }
  void before_backward() override { reducer_->set_boundary(true); }
  void after_backward() override {
    at::NoGradGuard no_grad;
    reducer_->finish();
  }
  int64_t bytes() const override { return tensor_bytes(part_grad_); }

 private:
  void reduce_buckets() override {}
  bool stage(int i, bool again) {
    if (!note_used(i)) return false;
    TORCH_CHECK(!again, "zero: parameter ", named_[i].first, " got a second gradient before its bucket was "
                "reduced; run one backward per micro-batch through the engine");
    return stage_gradient(layout_, i, named_[i].second, staging_, reduce_.dtype);
  }

  std::vector<at::Tensor> staging_;
  std::unique_ptr<parallel::BucketReducer> reducer_;  // last: destroyed first
};

}  // namespace

std::unique_ptr<ShardGradients> make_shard_gradients(const NamedParams& named, const ShardLayout& layout,
                                                     const StrategyOptions& options,
                                                     std::shared_ptr<comm::Communicator> dp) {
  if (options.zero.stage == 1) return std::make_unique<BoundaryGradients>(named, layout, options, std::move(dp));
  return std::make_unique<BucketedGradients>(named, layout, options, std::move(dp));
}

}  // namespace xtrain::zero
