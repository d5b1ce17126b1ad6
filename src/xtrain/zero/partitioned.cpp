#include "xtrain/zero/partitioned.h"

#include <ATen/Functions.h>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/zero/shard_io.h"

namespace xtrain::zero {

PartitionedStrategy::PartitionedStrategy(NamedParams params, const StrategyOptions& options,
                                         std::shared_ptr<comm::Communicator> dp)
    : options_(options), dp_(std::move(dp)), named_(std::move(params)), rank_(dp_->rank()) {
  const int64_t stage = options_.zero.stage;
  TORCH_INTERNAL_ASSERT(stage == 1 || stage == 2);
  XTRAIN_USAGE_CHECK(options_.zero.reduce_bucket_size > 0, "zero: reduce_bucket_size must be > 0, got ",
                     options_.zero.reduce_bucket_size, " (zero_optimization.reduce_bucket_size)");
  const auto group = optim::group_indices(named_, options_.param_group);
  // Stage 1: the whole model is one unit; stage 2: units of reduce_bucket_size elements.
  const auto units = stage == 1 ? std::vector<int>(named_.size(), 0) : units_by_size(named_, options_.zero.reduce_bucket_size);
  sl_ = make_shard_layout(named_, group, units, dp_->size(), options_.alignment);
  norm_ranges_ = weighted_ranges(sl_, rank_, options_.norm_weights);
  state_ = make_optimizer_state(options_, rank_, sl_.shard_numel());
  initialize_state();
  model_params_ = at::zeros({sl_.flat.numel}, options_.param_dtype);
  bind_params(named_, sl_.flat, model_params_);
  segments_ = sl_.local_segments(rank_);
  grads_ = make_shard_gradients(named_, sl_, options_, dp_);  // hooks after the parameters' final dtype
}

PartitionedStrategy::~PartitionedStrategy() = default;

// Rank 0's initial values, then each rank keeps its fp32 shard; the parameters start from them.
void PartitionedStrategy::initialize_state() {
  at::NoGradGuard no_grad;
  auto full = at::zeros({sl_.flat.numel}, at::kFloat);
  for (size_t i = 0; i < named_.size(); ++i) {
    const auto& s = sl_.flat.slots[i];
    full.narrow(0, s.offset, s.numel).copy_(named_[i].second.reshape({-1}));
  }
  if (dp_->distributed()) dp_->broadcast(full, 0);
  auto master = at::empty({sl_.shard_numel()}, at::kFloat);
  for (size_t u = 0; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    master.narrow(0, unit.local, unit.shard).copy_(full.narrow(0, sl_.owned_begin(u, rank_), unit.shard));
  }
  state_->initialize(0, master);
  for (size_t i = 0; i < named_.size(); ++i) {
    const auto& s = sl_.flat.slots[i];
    named_[i].second.set_data(full.narrow(0, s.offset, s.numel).view(s.shape).clone());
  }
}

std::string PartitionedStrategy::describe() const {
  return c10::str("ZeRO stage ", options_.zero.stage, ": optimizer state", grads_->what(), " partitioned over ",
                  dp_->size(), " data-parallel ranks (", sl_.units.size(), " units, ", sl_.shard_numel(),
                  " elements per rank)", state_->describe());
}

void PartitionedStrategy::before_backward(bool /*boundary*/) { grads_->before_backward(); }
void PartitionedStrategy::after_backward(bool /*boundary*/) { grads_->after_backward(); }
void PartitionedStrategy::reduce() { grads_->reduce(); }

std::vector<at::Tensor> PartitionedStrategy::unreduced_gradient(const std::string& name) {
  auto out = grads_->unreduced(sl_.flat.slot(name));
  return out.empty() ? Strategy::unreduced_gradient(name) : out;
}

double PartitionedStrategy::grad_norm_squared() {
  return shard_grad_norm_squared(grads_->part_grad(), norm_ranges_, *dp_);
}

void PartitionedStrategy::step(const StepHyper& h) {
  at::NoGradGuard no_grad;
  state_->step(grads_->part_grad(), segments_, h,
               [this](int64_t local, const at::Tensor& values) { write_own(local, values); });
  gather_params();
}

// Each unit's shards in allgather_bucket_size pieces (DeepSpeed's all_gather_dp_groups): one
// all-gather per piece, or with allgather_partitions false one broadcast per rank and piece.
void PartitionedStrategy::gather_params() {
  if (!dp_->distributed()) return;
  const auto& z = options_.zero;
  const int64_t world = dp_->size();
  std::vector<comm::Work> works;
  for (size_t u = 0; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    for (const auto& [off, len] : allgather_pieces(unit.shard, world, z.allgather_bucket_size)) {
      std::vector<at::Tensor> pieces;
      for (int64_t r = 0; r < world; ++r) pieces.push_back(model_params_.narrow(0, sl_.owned_begin(u, r) + off, len));
      if (z.allgather_partitions) {
        works.push_back(dp_->all_gather(pieces[rank_], pieces, /*async=*/true));
        continue;
      }
      for (int64_t r = 0; r < world; ++r) {
        works.push_back(dp_->broadcast(pieces[r], static_cast<int>(r), /*async=*/true));
      }
    }
  }
  for (auto& w : works) w.wait();
}

// Shard elements [local, local + n) of the master weights into this rank's slices of the model's
// parameters (the model's dtype).
void PartitionedStrategy::write_own(int64_t local, const at::Tensor& values) {
  const int64_t end = local + values.numel();
  for (size_t u = 0; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    const int64_t b = std::max(local, unit.local), e = std::min(end, unit.local + unit.shard);
    if (b >= e) continue;
    auto own = model_params_.narrow(0, sl_.owned_begin(u, rank_) + (b - unit.local), e - b);
    own.copy_(values.narrow(0, b - local, e - b));
  }
}

void PartitionedStrategy::zero_grads() { grads_->zero(); }

std::string PartitionedStrategy::optimizer_name() const { return state_->optimizer_name(); }
int64_t PartitionedStrategy::optimizer_step_count() const { return state_->step_count(); }
void PartitionedStrategy::set_optimizer_step_count(int64_t n) { state_->set_step_count(n); }

MemoryReport PartitionedStrategy::memory() const {
  MemoryReport r;
  r.param_bytes = tensor_bytes(model_params_);
  r.grad_bytes = grads_->bytes();
  state_->account(r);
  return r;
}

void PartitionedStrategy::save(checkpoint::CheckpointWriter& writer) const {
  save_state(writer, sl_, rank_, options_.zero.stage, *state_);
}

void PartitionedStrategy::load(const checkpoint::CheckpointReader& reader, bool load_optimizer) {
  at::NoGradGuard no_grad;
  const auto model = load_state(reader, load_optimizer, sl_, rank_, options_, *state_);
  for (const auto& s : sl_.flat.slots) model_params_.narrow(0, s.offset, s.numel).copy_(model.at(s.name).reshape({-1}));
  zero_grads();
}

}  // namespace xtrain::zero
