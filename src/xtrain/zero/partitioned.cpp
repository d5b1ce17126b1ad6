#include "xtrain/zero/partitioned.h"

#include <ATen/Functions.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/parallel/data/bucket_plan.h"
#include "xtrain/zero/offload/nvme_optimizer.h"
#include "xtrain/zero/shard_io.h"
#include "xtrain/zero/shard_ops.h"

namespace xtrain::zero {
namespace {

struct GradReadyHook : torch::autograd::FunctionPostHook {
  GradReadyHook(PartitionedStrategy* owner, int slot) : owner_(owner), slot_(slot) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    owner_->on_grad(slot_);
    return outputs;
  }
  PartitionedStrategy* owner_;
  int slot_;
};

int64_t bytes(const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

}  // namespace

PartitionedStrategy::PartitionedStrategy(NamedParams params, const StrategyOptions& options,
                                         std::shared_ptr<comm::Communicator> dp)
    : options_(options), dp_(std::move(dp)), named_(std::move(params)), rank_(dp_->rank()) {
  const int64_t stage = options_.zero.stage;
  TORCH_INTERNAL_ASSERT(stage == 1 || stage == 2);
  XTRAIN_USAGE_CHECK(options_.zero.reduce_bucket_size > 0, "zero: reduce_bucket_size must be > 0, got ",
                     options_.zero.reduce_bucket_size, " (zero_optimization.reduce_bucket_size)");
  const auto group = optim::group_indices(named_, options_.param_group);
  const auto units = stage == 1 ? std::vector<int>(named_.size(), 0) : units_by_size(named_, options_.zero.reduce_bucket_size);
  sl_ = make_shard_layout(named_, group, units, dp_->size(), options_.alignment);
  norm_ranges_ = weighted_ranges(sl_, rank_, options_.norm_weights);
  const auto dtype = options_.param_dtype;
  reduce_dtype_ = dtype == at::kFloat || options_.grad_accum_dtype == at::kFloat ? at::kFloat : dtype;
  if (dp_->distributed()) {  // one rank communicates nothing: no scaling, no cast
    const auto scaling = parallel::gradient_scaling(dp_->size(), options_.prescale_gradients,
                                                    options_.gradient_predivide_factor);
    reduce_options_ = {options_.zero.reduce_scatter, options_.communication_dtype, scaling.pre, scaling.post};
  }
  post_after_ = reduce_options_.post_after(reduce_dtype_);
  used_.assign(named_.size(), 0);

  at::NoGradGuard no_grad;
  {  // rank 0's initial values, then each rank keeps its fp32 shard
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
    if (options_.zero.offload_optimizer.device == "nvme") {
      const auto& z = options_.zero;
      nvme_ = std::make_unique<NvmeOptimizerState>(z.offload_optimizer.nvme_path, rank_, sl_.shard_numel(),
                                                   options_.optimizer, z.offload_optimizer, options_.aio,
                                                   z.sub_group_size);
      nvme_->initialize(master);
    } else {
      master_ = master;
    }
    for (size_t i = 0; i < named_.size(); ++i) {
      const auto& s = sl_.flat.slots[i];
      named_[i].second.set_data(full.narrow(0, s.offset, s.numel).view(s.shape).clone());
    }
  }
  model_params_ = at::zeros({sl_.flat.numel}, dtype);
  bind_params(named_, sl_.flat, model_params_);
  segments_ = sl_.local_segments(rank_);
  if (!nvme_) {
    optimizer_ = optim::make_optimizer(options_.optimizer);
    optimizer_->init_state(sl_.shard_numel());
  }
  setup_gradients();
}

// Stage 1: a full gradient buffer the parameters' .grad are views of, reduced at the boundary.
// Stage 2: per-unit staging filled by the hooks. Hooks also record which parameters got a gradient.
void PartitionedStrategy::setup_gradients() {
  const auto dtype = options_.param_dtype;
  const int64_t stage = options_.zero.stage;
  if (stage == 1) {
    grads_ = at::zeros({sl_.flat.numel}, dtype);
    bind_grads(named_, sl_.flat, grads_);
    if (reduce_dtype_ != dtype) grad_acc_ = at::zeros({sl_.flat.numel}, reduce_dtype_);
    const auto& src = grad_acc_.defined() ? grad_acc_ : grads_;
    part_grad_ = src.narrow(0, sl_.owned_begin(0, rank_), sl_.units[0].shard);  // reduced in place
  } else {
    part_grad_ = at::zeros({sl_.shard_numel()}, reduce_dtype_);
    staging_.resize(sl_.units.size());
  }
  if (stage == 1 && options_.zero.ignore_unused_parameters) return;
  for (size_t i = 0; i < named_.size(); ++i) {
    auto node = torch::autograd::impl::grad_accumulator(named_[i].second);
    const uintptr_t key = node->add_post_hook(std::make_unique<GradReadyHook>(this, static_cast<int>(i)));
    hooks_.emplace_back(std::move(node), key);
  }
  before_backward(true);
}

PartitionedStrategy::~PartitionedStrategy() {
  for (auto& [node, key] : hooks_) node->del_post_hook(key);
  for (auto& f : inflight_) {
    try {
      f.reduction.wait();
    } catch (const std::exception&) {
    }
  }
}

std::string PartitionedStrategy::describe() const {
  return c10::str("ZeRO stage ", options_.zero.stage, ": optimizer state", options_.zero.stage == 2 ? " and gradients" : "",
                  " partitioned over ", dp_->size(), " data-parallel ranks (", sl_.units.size(), " units, ",
                  sl_.shard_numel(), " elements per rank)",
                  options_.zero.offload_optimizer.device == "cpu" ? "; optimizer state and step on the CPU" : "",
                  nvme_ ? c10::str("; fp32 master and optimizer state (", nvme_->disk_bytes(), " bytes) on NVMe in ",
                                   nvme_->file_path(), nvme_->direct_io() ? "" : " (buffered I/O)", ", stepped in ",
                                   nvme_->num_chunks(), " chunks of ", nvme_->chunk_numel(), " elements")
                        : std::string());
}

void PartitionedStrategy::before_backward(bool /*boundary*/) {
  if (options_.zero.stage != 2) return;
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.clear();
  for (const auto& u : sl_.units) pending_.push_back(u.end_slot - u.first_slot);
  ready_.assign(named_.size(), 0);
  launched_ = 0;
}

// Stage 2: the gradient moves into its unit's staging buffer and .grad is released. Stage 1 only
// notes that the parameter was used.
void PartitionedStrategy::on_grad(int i) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& p = named_[i].second;
  const at::Tensor g = p.grad();
  if (!g.defined()) return;
  used_[i] = 1;
  if (options_.zero.stage != 2) return;
  TORCH_CHECK(!ready_[i], "zero: parameter ", named_[i].first, " got a second gradient before its bucket was "
              "reduced; run one backward per micro-batch through the engine");
  const int u = sl_.unit_of_slot[i];
  const auto& unit = sl_.units[u];
  if (!staging_[u].defined()) staging_[u] = at::zeros({unit.numel}, reduce_dtype_);
  const auto& s = sl_.flat.slots[i];
  staging_[u].narrow(0, s.offset - unit.begin, s.numel).copy_(g.reshape({-1}));
  p.mutable_grad() = at::Tensor();
  ready_[i] = 1;
  --pending_[u];
  launch_ready();
}

void PartitionedStrategy::launch_ready() {
  const size_t n = sl_.units.size();
  while (launched_ < n && pending_[n - 1 - launched_] == 0) launch(n - 1 - launched_++);
}

void PartitionedStrategy::launch(size_t u) {
  const auto& unit = sl_.units[u];
  if (!staging_[u].defined()) staging_[u] = at::zeros({unit.numel}, reduce_dtype_);  // no gradient arrived
  inflight_.push_back({u, UnitReduction(*dp_, staging_[u], reduce_options_)});
  staging_[u] = at::Tensor();
  drain(options_.zero.overlap_comm > 0 ? 2 : 0);  // overlap: two buckets in flight bound the staging memory
}

void PartitionedStrategy::drain(size_t keep) {
  while (inflight_.size() > keep) {
    auto f = std::move(inflight_.front());
    inflight_.pop_front();
    const auto& unit = sl_.units[f.unit];
    part_grad_.narrow(0, unit.local, unit.shard).add_(f.reduction.wait());
  }
}

void PartitionedStrategy::after_backward(bool /*boundary*/) {
  at::NoGradGuard no_grad;
  if (options_.zero.stage == 2) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t n = sl_.units.size();
    while (launched_ < n) launch(n - 1 - launched_++);
    drain(0);
    return;
  }
  if (grad_acc_.defined()) {  // mixed precision: fp32 accumulation after every micro-batch
    grad_acc_.add_(grads_);
    grads_.zero_();
  }
}

// Stage 1: the whole buffer is one unit, reduced in place (part_grad_ is this rank's slice of it).
void PartitionedStrategy::reduce() {
  at::NoGradGuard no_grad;
  if (!options_.zero.ignore_unused_parameters) check_unused_params();
  if (options_.zero.stage == 1) {
    const auto& src = grad_acc_.defined() ? grad_acc_ : grads_;
    reduce_in_place(*dp_, src, reduce_options_, comm::Communicator::kRingPieceElements);
  }
  if (post_after_ != 1.0) part_grad_.mul_(post_after_);
}

// DeepSpeed asserts when a parameter had no gradient (stage_1_and_2, with ignore_unused_parameters
// false). Every rank learns how many were unused anywhere, so all fail together rather than leave
// the others waiting in the next collective.
void PartitionedStrategy::check_unused_params() {
  std::string names;
  int64_t unused = 0;
  for (size_t i = 0; i < named_.size(); ++i) {
    if (used_[i]) continue;
    if (++unused <= 5) names += (names.empty() ? "" : ", ") + named_[i].first;
  }
  const double total = comm::all_reduce_sum(*dp_, static_cast<double>(unused));
  std::fill(used_.begin(), used_.end(), 0);
  if (total == 0) return;
  const std::string what = unused ? c10::str(unused, " parameter(s) got no gradient in this step on rank ", rank_, ": ",
                                             names, unused > 5 ? ", ..." : "")
                                  : std::string("a parameter got no gradient in this step on another rank");
  XTRAIN_USAGE_ERROR("zero: ", what, " (zero_optimization.ignore_unused_parameters is false); use them in the loss, ",
                     "freeze them (requires_grad false) or set ignore_unused_parameters to true");
}

std::vector<at::Tensor> PartitionedStrategy::unreduced_gradient(const std::string& name) {
  if (options_.zero.stage != 1) return Strategy::unreduced_gradient(name);
  const auto& slot = sl_.flat.slot(name);
  std::vector<at::Tensor> out = {grads_.narrow(0, slot.offset, slot.numel)};
  if (grad_acc_.defined()) out.push_back(grad_acc_.narrow(0, slot.offset, slot.numel));
  return out;
}

double PartitionedStrategy::grad_norm_squared() { return shard_grad_norm_squared(part_grad_, norm_ranges_, *dp_); }

void PartitionedStrategy::step(const StepHyper& h) {
  // master_ is undefined with NVMe offload: the master comes from disk
  auto in = shard_step_inputs(master_, part_grad_, segments_, h);
  at::NoGradGuard no_grad;
  if (nvme_) {
    nvme_->step(in, [this](int64_t local, const at::Tensor& values) { write_own(local, values); });
  } else {
    optimizer_->step(in);
    write_own(0, master_);
  }
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

void PartitionedStrategy::zero_grads() {
  std::fill(used_.begin(), used_.end(), 0);
  if (grads_.defined()) grads_.zero_();
  if (grad_acc_.defined()) grad_acc_.zero_();
  part_grad_.zero_();
}

std::string PartitionedStrategy::optimizer_name() const {
  return nvme_ ? nvme_->optimizer_name() : optimizer_->name();
}
int64_t PartitionedStrategy::optimizer_step_count() const {
  return nvme_ ? nvme_->step_count() : optimizer_->step_count();
}
void PartitionedStrategy::set_optimizer_step_count(int64_t n) {
  if (nvme_) {
    nvme_->set_step_count(n);
  } else {
    optimizer_->set_step_count(n);
  }
}

MemoryReport PartitionedStrategy::memory() const {
  MemoryReport r;
  r.param_bytes = bytes(model_params_);
  r.grad_bytes = options_.zero.stage == 1 ? bytes(grads_) + bytes(grad_acc_) : bytes(part_grad_);
  if (nvme_) {  // in memory only the chunk buffers, each master + states in equal parts
    r.master_bytes = nvme_->buffer_bytes() / static_cast<int64_t>(1 + nvme_->state_names().size());
    r.optimizer_bytes = nvme_->buffer_bytes() - r.master_bytes;
    r.disk_bytes = nvme_->disk_bytes();
    return r;
  }
  r.master_bytes = bytes(master_);
  for (auto& [name, t] : optimizer_->state()) r.optimizer_bytes += bytes(t);
  return r;
}

// The shard buffers save()/load() go through: in memory, or read whole from the NVMe file.
NamedBuffers PartitionedStrategy::state_buffers(bool with_optimizer) const {
  if (nvme_) {
    NamedBuffers buffers{{"master", nvme_->read("master")}};
    if (with_optimizer) {
      for (const auto& name : nvme_->state_names()) buffers.emplace_back(name, nvme_->read(name));
    }
    return buffers;
  }
  NamedBuffers buffers{{"master", master_}};
  if (with_optimizer) {
    for (auto& [name, t] : optimizer_->state()) buffers.emplace_back(name, t);
  }
  return buffers;
}

void PartitionedStrategy::save(checkpoint::CheckpointWriter& writer) const {
  save_shards(writer, sl_, rank_, options_.zero.stage, state_buffers(true));
}

void PartitionedStrategy::load(const checkpoint::CheckpointReader& reader, bool load_optimizer) {
  at::NoGradGuard no_grad;
  const auto full = consolidate(reader, load_optimizer);
  const auto buffers = state_buffers(load_optimizer);
  load_shards(full, sl_, rank_, buffers);
  if (!options_.zero.load_from_fp32_weights) round_master(buffers, options_.param_dtype);
  if (nvme_) {
    for (const auto& [name, t] : buffers) nvme_->write(name, t);
  }
  std::map<std::string, at::Tensor> model(full.model.begin(), full.model.end());
  for (const auto& s : sl_.flat.slots) model_params_.narrow(0, s.offset, s.numel).copy_(model.at(s.name).reshape({-1}));
  zero_grads();
}

}  // namespace xtrain::zero
