#include "xtrain/zero/stage3.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>

#include <map>

#include "xtrain/base/error.h"
#include "xtrain/base/memory_pool.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/zero/shard_io.h"

namespace xtrain::zero {

Stage3Strategy::Stage3Strategy(NamedParams params, std::shared_ptr<torch::nn::Module> module,
                               const StrategyOptions& options, std::shared_ptr<comm::Communicator> dp)
    : options_(options), dp_(std::move(dp)), rank_(dp_->rank()) {
  check_options();
  reduce_ = shard_reduce(options_, *dp_);
  for (const auto& p : params) given_names_.push_back(p.first);
  const auto& z = options_.zero;
  auto plan = plan_units(params, module, z.stage3_param_persistence_threshold, z.reduce_bucket_size);
  partitioned_ = plan.partitioned;
  named_ = plan.ordered;
  sl_ = make_shard_layout(named_, optim::group_indices(named_, options_.param_group), plan.unit_of, dp_->size(),
                          options_.alignment);
  norm_ranges_ = weighted_ranges(sl_, rank_, options_.norm_weights);
  segments_ = sl_.local_segments(rank_);
  // Nothing shard-sized is built twice, so a model larger than memory can be partitioned onto NVMe.
  state_ = make_optimizer_state(options_, rank_, sl_.shard_numel());
  store_ = std::make_unique<ParameterStore>(named_, sl_, partitioned_, options_, *dp_, state_->resident_master());
  store_->initialize(*state_);
  setup_gradients();
  memory_pool::release_cached();  // the model's whole parameters, freed above, go back to the system
  events_ = std::shared_ptr<UnitEvents>(static_cast<UnitEvents*>(this), [](UnitEvents*) {});
  wrappers_ = std::make_unique<UnitWrappers>(module, plan, events_);
}

void Stage3Strategy::check_options() const {
  const auto& z = options_.zero;
  XTRAIN_USAGE_CHECK(z.reduce_bucket_size > 0, "zero: reduce_bucket_size must be > 0, got ", z.reduce_bucket_size,
                     " (zero_optimization.reduce_bucket_size)");
  XTRAIN_USAGE_CHECK(z.stage3_prefetch_bucket_size >= 0 && z.stage3_max_live_parameters >= 0 &&
                         z.stage3_param_persistence_threshold >= 0,
                     "zero: stage3_prefetch_bucket_size, stage3_max_live_parameters and "
                     "stage3_param_persistence_threshold must be >= 0");
}

// Unit u's reduction is launched when its backward is done, the persistent units' after backward.
void Stage3Strategy::setup_gradients() {
  part_grad_ = at::zeros({sl_.shard_numel()}, reduce_.dtype);
  staging_.resize(sl_.units.size());
  needs_reduce_.assign(sl_.units.size(), 0);
  parallel::CollectiveOptions co;
  co.max_in_flight = options_.zero.overlap() ? 2 : 0;
  reducer_ = std::make_unique<parallel::BucketReducer>(
      std::vector<parallel::ReducerParam>{}, std::move(co),
      unit_collective(*dp_, sl_, reduce_, staging_, part_grad_, [](int b) { return static_cast<size_t>(b); }));
}

Stage3Strategy::~Stage3Strategy() {
  events_.reset();    // wrappers that outlive the strategy pass through; pending backward hooks do nothing
  wrappers_.reset();  // the Sequentials get their children back
  reducer_.reset();   // reductions in flight complete
}

std::string Stage3Strategy::describe() const {
  return c10::str("ZeRO stage 3: parameters, gradients and optimizer state partitioned over ", dp_->size(),
                  " data-parallel ranks (", partitioned_, " units gathered on use, ", partitioned_numel(), " of ",
                  sl_.flat.used, " parameters partitioned; ", sl_.shard_numel(), " elements per rank)",
                  state_->describe());
}

int64_t Stage3Strategy::partitioned_numel() const {
  int64_t n = 0;
  for (size_t i = 0; i < named_.size(); ++i) {
    if (static_cast<size_t>(sl_.unit_of_slot[i]) < partitioned_) n += sl_.flat.slots[i].numel;
  }
  return n;
}

at::Tensor Stage3Strategy::run_unit(size_t u, const UnitFn& inner, const at::Tensor& x) {
  TORCH_INTERNAL_ASSERT(u < partitioned_);
  store_->gather(u);
  store_->prefetch(u, +1);
  if (!at::GradMode::is_enabled()) {
    auto y = inner(x);
    store_->release(u);
    return y;
  }
  needs_reduce_[u] = 1;
  auto y = inner(x.requires_grad() ? unit_input(x, events_, u) : x);
  if (y.requires_grad()) y = unit_output(y, events_, u);
  store_->release(u);
  return y;
}

void Stage3Strategy::on_pre_backward(size_t u) {
  at::NoGradGuard no_grad;
  store_->gather(u);
  store_->prefetch(u, -1);
}

void Stage3Strategy::on_post_backward(size_t u) {
  at::NoGradGuard no_grad;
  if (!needs_reduce_[u]) return;
  const auto& unit = sl_.units[u];
  for (int i = unit.first_slot; i < unit.end_slot; ++i) stage_gradient(sl_, i, named_[i].second, staging_, reduce_.dtype);
  needs_reduce_[u] = 0;
  store_->release(u);
  reducer_->launch(static_cast<int>(u));
}

void Stage3Strategy::reduce_unit(size_t u, at::Tensor staging) {
  staging_[u] = std::move(staging);
  reducer_->launch(static_cast<int>(u));
}

void Stage3Strategy::before_backward(bool /*boundary*/) {}

// Units whose post-backward did not run (an input without grad: the first unit of a Sequential fed
// the raw batch) are reduced now, in reverse order as autograd would; then the persistent buckets.
void Stage3Strategy::after_backward(bool /*boundary*/) {
  at::NoGradGuard no_grad;
  for (size_t u = partitioned_; u-- > 0;) on_post_backward(u);
  for (size_t u = 0; u < partitioned_; ++u) store_->release(u);  // prefetched for a backward that did not come
  for (size_t u = sl_.units.size(); u-- > partitioned_;) {
    reduce_unit(u, store_->persistent_grad(u).to(reduce_.dtype, /*non_blocking=*/false, /*copy=*/true));
  }
  reducer_->complete(0);
  store_->zero_persistent_grads();
}

void Stage3Strategy::reduce() {
  at::NoGradGuard no_grad;
  if (reduce_.post_after != 1.0) part_grad_.mul_(reduce_.post_after);
}

double Stage3Strategy::grad_norm_squared() { return shard_grad_norm_squared(part_grad_, norm_ranges_, *dp_); }

void Stage3Strategy::step(const StepHyper& h) {
  at::NoGradGuard no_grad;
  state_->step(part_grad_, segments_, h, [this](int64_t local, const at::Tensor& master) { store_->update(local, master); });
  store_->refresh_persistent();  // persistent parameters: own shard back into every rank's copy
}

void Stage3Strategy::zero_grads() {
  store_->zero_persistent_grads();
  part_grad_.zero_();
}

std::string Stage3Strategy::optimizer_name() const { return state_->optimizer_name(); }
int64_t Stage3Strategy::optimizer_step_count() const { return state_->step_count(); }
void Stage3Strategy::set_optimizer_step_count(int64_t n) { state_->set_step_count(n); }

MemoryReport Stage3Strategy::memory() const {
  MemoryReport r;
  r.param_bytes = store_->param_bytes();
  r.disk_bytes = store_->disk_bytes();
  r.grad_bytes = tensor_bytes(part_grad_) + store_->grad_bytes();
  state_->account(r);
  return r;
}

NamedParams Stage3Strategy::gathered_parameters() {
  at::NoGradGuard no_grad;
  const auto master = state_->resident_master();
  auto full = at::empty({sl_.flat.numel}, at::kFloat);
  for (size_t u = 0; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    const auto own = master.defined() ? master.narrow(0, unit.local, unit.shard) : store_->shard_of(u);
    dp_->all_gather(own.to(at::kFloat), full.narrow(0, unit.begin, unit.numel));
  }
  std::map<std::string, at::Tensor> by_name;
  for (const auto& s : sl_.flat.slots) by_name[s.name] = full.narrow(0, s.offset, s.numel).view(s.shape).to(options_.param_dtype);
  NamedParams out;
  for (const auto& name : given_names_) out.emplace_back(name, by_name.at(name));
  return out;
}

void Stage3Strategy::save(checkpoint::CheckpointWriter& writer) const {
  save_state(writer, sl_, rank_, 3, *state_);
}

void Stage3Strategy::load(const checkpoint::CheckpointReader& reader, bool load_optimizer) {
  at::NoGradGuard no_grad;
  const auto model = load_state(reader, load_optimizer, sl_, rank_, options_, *state_);
  auto flat = at::zeros({sl_.flat.numel}, options_.param_dtype);
  for (const auto& s : sl_.flat.slots) flat.narrow(0, s.offset, s.numel).copy_(model.at(s.name).reshape({-1}));
  store_->load(flat);
  zero_grads();
}

}  // namespace xtrain::zero
