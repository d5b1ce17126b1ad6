#include "xtrain/zero/stage3.h"

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "xtrain/base/error.h"
#include "xtrain/base/memory_pool.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/nn/unit_router.h"
#include "xtrain/parallel/data/bucket_plan.h"
#include "xtrain/zero/offload/disk_backed_allocations.h"
#include "xtrain/zero/offload/nvme_optimizer.h"
#include "xtrain/zero/offload/uring_file.h"
#include "xtrain/zero/shard_io.h"
#include "xtrain/zero/shard_ops.h"

namespace xtrain::zero {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Self = std::shared_ptr<Stage3Strategy*>;

int64_t bytes(const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

// Identity on a unit's input; its backward runs once the unit's backward is done. The outputs of
// both functions are copies, not views, so a module may modify them in place.
struct PostBackward : torch::autograd::Function<PostBackward> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Stage3Strategy* owner, int64_t unit) {
    ctx->saved_data["owner"] = reinterpret_cast<int64_t>(owner);
    ctx->saved_data["unit"] = unit;
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* owner = reinterpret_cast<Stage3Strategy*>(ctx->saved_data["owner"].toInt());
    owner->on_post_backward(static_cast<size_t>(ctx->saved_data["unit"].toInt()));
    return {grads[0], at::Tensor(), at::Tensor()};
  }
};

// Identity on a unit's output; its backward runs before the gradient enters the unit.
struct PreBackward : torch::autograd::Function<PreBackward> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& y, Stage3Strategy* owner, int64_t unit) {
    ctx->saved_data["owner"] = reinterpret_cast<int64_t>(owner);
    ctx->saved_data["unit"] = unit;
    return y.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* owner = reinterpret_cast<Stage3Strategy*>(ctx->saved_data["owner"].toInt());
    owner->on_pre_backward(static_cast<size_t>(ctx->saved_data["unit"].toInt()));
    return {grads[0], at::Tensor(), at::Tensor()};
  }
};

// Stands in for a Sequential child: the child runs as unit `unit` of the strategy.
class ZeroUnitImpl : public torch::nn::Module {
 public:
  ZeroUnitImpl(torch::nn::AnyModule inner, Self owner, size_t unit)
      : inner_(std::move(inner)), owner_(std::move(owner)), unit_(unit) {}
  at::Tensor forward(const at::Tensor& x) {
    const auto call = [this](const at::Tensor& in) { return inner_.forward<at::Tensor>(in); };
    return *owner_ ? (*owner_)->run_unit(unit_, call, x) : call(x);
  }

 private:
  torch::nn::AnyModule inner_;
  Self owner_;
  size_t unit_;
};

const void* key(const at::Tensor& t) { return t.unsafeGetTensorImpl(); }

}  // namespace

Stage3Strategy::Stage3Strategy(NamedParams params, std::shared_ptr<torch::nn::Module> module,
                               const StrategyOptions& options, std::shared_ptr<comm::Communicator> dp)
    : options_(options), dp_(std::move(dp)), rank_(dp_->rank()), self_(std::make_shared<Stage3Strategy*>(this)) {
  const auto& z = options_.zero;
  XTRAIN_USAGE_CHECK(z.reduce_bucket_size > 0, "zero: reduce_bucket_size must be > 0, got ", z.reduce_bucket_size,
                     " (zero_optimization.reduce_bucket_size)");
  XTRAIN_USAGE_CHECK(z.stage3_prefetch_bucket_size >= 0 && z.stage3_max_live_parameters >= 0 &&
                         z.stage3_param_persistence_threshold >= 0,
                     "zero: stage3_prefetch_bucket_size, stage3_max_live_parameters and "
                     "stage3_param_persistence_threshold must be >= 0");
  dtype_ = options_.param_dtype;
  reduce_dtype_ = dtype_ == at::kFloat || options_.grad_accum_dtype == at::kFloat ? at::kFloat : dtype_;
  if (dp_->distributed()) {  // one rank communicates nothing: no scaling, no cast
    const auto scaling = parallel::gradient_scaling(dp_->size(), options_.prescale_gradients,
                                                    options_.gradient_predivide_factor);
    reduce_options_ = {z.reduce_scatter, options_.communication_dtype, scaling.pre, scaling.post};
  }
  post_after_ = reduce_options_.post_after(reduce_dtype_);

  // Units: routed submodules first (in call order), then the children of every Sequential. A
  // module is a unit when none of its parameters belongs to an earlier unit.
  std::unordered_map<const void*, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) {
    index[key(params[i].second)] = i;
    given_names_.push_back(params[i].first);
  }
  std::vector<int> unit_of_param(params.size(), -1);
  std::vector<std::vector<size_t>> unit_params;  // partitioned parameters of each unit
  std::vector<std::shared_ptr<torch::nn::Module>> unit_modules;
  auto try_unit = [&](const std::shared_ptr<torch::nn::Module>& m) -> bool {
    std::vector<size_t> mine, big;
    for (const auto& p : m->parameters(/*recurse=*/true)) {
      auto it = index.find(key(p));
      if (it == index.end()) continue;  // frozen
      if (unit_of_param[it->second] != -1) return false;
      mine.push_back(it->second);
    }
    for (size_t i : mine) {
      if (params[i].second.numel() > z.stage3_param_persistence_threshold) big.push_back(i);
    }
    if (big.empty()) return false;
    std::sort(big.begin(), big.end());
    for (size_t i : big) unit_of_param[i] = static_cast<int>(unit_params.size());
    unit_params.push_back(std::move(big));
    unit_modules.push_back(m);
    return true;
  };
  std::vector<char> routed_unit;
  if (module) {
    if (auto* routed = dynamic_cast<nn::UnitRouted*>(module.get())) {
      for (const auto& m : routed->routed_units()) try_unit(m);
    }
    routed_unit.assign(unit_modules.size(), 1);
    for (const auto& m : module->modules(/*include_self=*/true)) {
      auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(m.get());
      if (!seq) continue;
      for (auto& any : *seq) {
        if (try_unit(any.ptr())) routed_unit.push_back(0);
      }
    }
  }
  partitioned_ = unit_params.size();

  // Layout order: each partitioned unit's parameters, then the persistent ones in buckets.
  NamedParams ordered;
  std::vector<int> unit_of;
  for (size_t u = 0; u < partitioned_; ++u) {
    for (size_t i : unit_params[u]) {
      ordered.push_back(params[i]);
      unit_of.push_back(static_cast<int>(u));
    }
  }
  NamedParams persistent;
  for (size_t i = 0; i < params.size(); ++i) {
    if (unit_of_param[i] == -1) persistent.push_back(params[i]);
  }
  if (!persistent.empty()) {
    for (int b : units_by_size(persistent, z.reduce_bucket_size)) unit_of.push_back(static_cast<int>(partitioned_) + b);
    ordered.insert(ordered.end(), persistent.begin(), persistent.end());
  }
  named_ = std::move(ordered);
  const auto group = optim::group_indices(named_, options_.param_group);
  sl_ = make_shard_layout(named_, group, unit_of, dp_->size(), options_.alignment);
  norm_ranges_ = weighted_ranges(sl_, rank_, options_.norm_weights);
  units_.resize(sl_.units.size());
  persist_begin_ = partitioned_ < sl_.units.size() ? sl_.units[partitioned_].begin : sl_.flat.numel;

  at::NoGradGuard no_grad;
  released_ = at::empty({0}, at::TensorOptions().dtype(dtype_));
  // Rank 0's initial values, one unit at a time (each unit's full parameters are released as soon as
  // this rank's shard is taken, so the transient is one unit, not a second copy of the model).
  // Where this rank's shards go: the fp32 master in memory or into the NVMe state file, the
  // low-precision shard in memory (the master itself in fp32) or into the parameter file. Nothing
  // shard-sized is built twice, so a model larger than memory can be partitioned onto NVMe.
  if (z.offload_optimizer.device == "nvme") {
    nvme_ = std::make_unique<NvmeOptimizerState>(z.offload_optimizer.nvme_path, rank_, sl_.shard_numel(),
                                                 options_.optimizer, z.offload_optimizer, options_.aio,
                                                 z.sub_group_size);
  } else {
    master_ = at::empty({sl_.shard_numel()}, at::kFloat);
  }
  if (z.offload_param.device == "nvme") {  // this rank's parameter shards in a file, read on gather
    const auto& dir = z.offload_param.nvme_path;
    require_nvme_folder(dir, "zero_optimization.offload_param.nvme_path");
    std::error_code ec;
    check_aio_options(options_.aio);
    const auto space = std::filesystem::space(dir, ec);
    const int64_t available = ec ? -1 : static_cast<int64_t>(space.available);
    const int64_t freed_later = disk_backed_bytes_freed_on_node();  // the model's construction blocks
    XTRAIN_USAGE_CHECK(available < 0 || available + freed_later >= param_file_bytes(), "zero: not enough free space ",
                       "for the parameter shards in ", dir, ": need ", param_file_bytes(), " bytes, available ",
                       available, " (zero_optimization.offload_param.nvme_path)");
    param_file_ = std::make_unique<UringFile>(
        c10::str(dir, "/xtrain_params_rank", rank_, "_", ::getpid(), ".bin"), options_.aio);
    param_file_->allocate(param_file_bytes(), /*reserve=*/available < 0 || available >= param_file_bytes());
  } else if (master_.defined() && dtype_ == at::kFloat) {
    param_shard_ = master_;
  } else {
    param_shard_ = at::empty({sl_.shard_numel()}, dtype_);
  }
  persist_ = at::empty({sl_.flat.numel - persist_begin_}, dtype_);
  for (size_t u = 0; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    auto full = at::zeros({unit.numel}, at::kFloat);
    for (int i = unit.first_slot; i < unit.end_slot; ++i) {
      const auto& s = sl_.flat.slots[i];
      full.narrow(0, s.offset - unit.begin, s.numel).copy_(named_[i].second.reshape({-1}));
    }
    if (dp_->distributed()) dp_->broadcast(full, 0);
    const auto own = full.narrow(0, rank_ * unit.shard, unit.shard);
    if (nvme_) {
      nvme_->write_range("master", unit.local, own);  // the moments start as the file's zeros
    } else {
      master_.narrow(0, unit.local, unit.shard).copy_(own);
    }
    if (!param_shard_.defined() || !param_shard_.is_same(master_)) write_shard(unit.local, own);
    const bool partitioned = u < partitioned_;
    if (!partitioned) persist_.narrow(0, unit.begin - persist_begin_, unit.numel).copy_(full);
    for (int i = unit.first_slot; i < unit.end_slot; ++i) {
      const auto& s = sl_.flat.slots[i];
      named_[i].second.set_data(partitioned ? released_
                                            : persist_.narrow(0, s.offset - persist_begin_, s.numel).view(s.shape));
    }
  }
  persist_grads_ = at::zeros_like(persist_);
  for (size_t i = 0; i < named_.size(); ++i) {
    const auto& s = sl_.flat.slots[i];
    if (static_cast<size_t>(sl_.unit_of_slot[i]) < partitioned_) continue;
    named_[i].second.mutable_grad() = persist_grads_.narrow(0, s.offset - persist_begin_, s.numel).view(s.shape);
  }
  part_grad_ = at::zeros({sl_.shard_numel()}, reduce_dtype_);
  segments_ = sl_.local_segments(rank_);
  if (!nvme_) {
    optimizer_ = optim::make_optimizer(options_.optimizer);
    optimizer_->init_state(sl_.shard_numel());
  }
  memory_pool::release_cached();  // the model's whole parameters, freed above, go back to the system

  // Wrappers: routed units through their owner, Sequential children replaced in place.
  if (module) {
    if (auto* routed = dynamic_cast<nn::UnitRouted*>(module.get())) {
      std::unordered_map<const torch::nn::Module*, size_t> unit_of_module;
      for (size_t u = 0; u < partitioned_; ++u) {
        if (routed_unit[u]) unit_of_module[unit_modules[u].get()] = u;
      }
      if (!unit_of_module.empty()) {
        Self self = self_;
        routed->wrap_units([self, unit_of_module](int64_t, torch::nn::Module& m, const nn::UnitRouted::UnitFn& inner,
                                                  const at::Tensor& x) {
          auto it = unit_of_module.find(&m);
          if (!*self || it == unit_of_module.end()) return inner(x);
          return (*self)->run_unit(it->second, inner, x);
        });
      }
    }
    std::unordered_map<const torch::nn::Module*, size_t> seq_unit;
    for (size_t u = 0; u < partitioned_; ++u) {
      if (!routed_unit[u]) seq_unit[unit_modules[u].get()] = u;
    }
    for (const auto& m : module->modules(/*include_self=*/true)) {
      auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(m.get());
      if (!seq) continue;
      std::vector<torch::nn::AnyModule> original;
      bool changed = false;
      for (auto& any : *seq) {
        original.push_back(any);
        auto it = seq_unit.find(any.ptr().get());
        if (it == seq_unit.end()) continue;
        any = torch::nn::AnyModule(std::make_shared<ZeroUnitImpl>(any, self_, it->second));
        changed = true;
      }
      if (changed) wrapped_sequentials_.emplace_back(m, std::move(original));
    }
  }
}

Stage3Strategy::~Stage3Strategy() {
  *self_ = nullptr;
  if (param_file_) {
    const std::string path = param_file_->path();
    param_file_.reset();
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  for (auto& [m, original] : wrapped_sequentials_) {
    auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(m.get());
    size_t i = 0;
    for (auto& any : *seq) any = original[i++];
  }
  for (auto& f : inflight_) {
    try {
      f.reduction.wait();
    } catch (const std::exception&) {
    }
  }
  for (auto& st : units_) {
    try {
      if (st.in_flight) st.work.wait();
    } catch (const std::exception&) {
    }
  }
}

std::string Stage3Strategy::describe() const {
  return c10::str("ZeRO stage 3: parameters, gradients and optimizer state partitioned over ", dp_->size(),
                  " data-parallel ranks (", partitioned_, " units gathered on use, ", partitioned_numel(), " of ",
                  sl_.flat.used, " parameters partitioned; ", sl_.shard_numel(), " elements per rank)",
                  nvme_ ? c10::str("; fp32 master and optimizer state (", nvme_->disk_bytes(), " bytes) on NVMe in ",
                                   nvme_->file_path(), ", stepped in ", nvme_->num_chunks(), " chunks")
                        : options_.zero.offload_optimizer.device == "cpu" ? "; optimizer state and step on the CPU"
                                                                           : "");
}

int64_t Stage3Strategy::partitioned_numel() const {
  int64_t n = 0;
  for (size_t i = 0; i < named_.size(); ++i) {
    if (static_cast<size_t>(sl_.unit_of_slot[i]) < partitioned_) n += sl_.flat.slots[i].numel;
  }
  return n;
}

int64_t Stage3Strategy::param_file_bytes() const {
  return sl_.shard_numel() * static_cast<int64_t>(c10::elementSize(dtype_));
}

at::Tensor Stage3Strategy::shard_of(size_t u) const {
  const auto& unit = sl_.units[u];
  if (!param_file_) return param_shard_.narrow(0, unit.local, unit.shard);
  auto out = at::empty({unit.shard}, at::TensorOptions().dtype(dtype_));
  const int64_t size = static_cast<int64_t>(c10::elementSize(dtype_));
  param_file_->read(out.data_ptr(), unit.shard * size, unit.local * size);
  return out;
}

void Stage3Strategy::write_shard(int64_t local, const at::Tensor& values) {
  if (!param_file_) {
    param_shard_.narrow(0, local, values.numel()).copy_(values);
    return;
  }
  const auto v = values.to(dtype_).contiguous();
  const int64_t size = static_cast<int64_t>(c10::elementSize(dtype_));
  param_file_->write(v.data_ptr(), v.numel() * size, local * size);
}

void Stage3Strategy::start_gather(size_t u) {
  auto& st = units_[u];
  if (st.full.defined()) return;
  const auto& unit = sl_.units[u];
  st.full = at::empty({unit.numel}, at::TensorOptions().dtype(dtype_));
  st.work = dp_->all_gather(shard_of(u), st.full, /*async=*/true);
  st.in_flight = true;
  live_ += unit.numel;
  peak_live_ = std::max(peak_live_, live_);
  ++gathers_;
}

void Stage3Strategy::gather(size_t u) {
  start_gather(u);
  auto& st = units_[u];
  if (!st.in_flight) return;
  st.work.wait();
  st.in_flight = false;
  const auto& unit = sl_.units[u];
  for (int i = unit.first_slot; i < unit.end_slot; ++i) {
    const auto& s = sl_.flat.slots[i];
    named_[i].second.set_data(st.full.narrow(0, s.offset - unit.begin, s.numel).view(s.shape));
  }
}

void Stage3Strategy::release(size_t u) {
  auto& st = units_[u];
  if (!st.full.defined()) return;
  if (st.in_flight) {
    st.work.wait();
    st.in_flight = false;
  }
  const auto& unit = sl_.units[u];
  for (int i = unit.first_slot; i < unit.end_slot; ++i) named_[i].second.set_data(released_);
  st.full = at::Tensor();
  live_ -= unit.numel;
}

// Gathers of the units after `from` in call order (direction +1 forward, -1 backward), up to
// stage3_prefetch_bucket_size elements, never above stage3_max_live_parameters in total. Depends on
// sizes and order only, so every rank issues the same gathers.
void Stage3Strategy::prefetch(size_t from, int direction) {
  const auto& z = options_.zero;
  int64_t budget = z.stage3_prefetch_bucket_size;
  for (int64_t v = static_cast<int64_t>(from) + direction; v >= 0 && v < static_cast<int64_t>(partitioned_);
       v += direction) {
    const auto& unit = sl_.units[v];
    if (units_[v].full.defined()) continue;
    if (unit.numel > budget || live_ + unit.numel > z.stage3_max_live_parameters) break;
    budget -= unit.numel;
    start_gather(static_cast<size_t>(v));
  }
}

at::Tensor Stage3Strategy::run_unit(size_t u, const std::function<at::Tensor(const at::Tensor&)>& inner,
                                    const at::Tensor& x) {
  TORCH_INTERNAL_ASSERT(u < partitioned_);
  gather(u);
  prefetch(u, +1);
  if (!at::GradMode::is_enabled()) {
    auto y = inner(x);
    release(u);
    return y;
  }
  units_[u].needs_reduce = true;
  const bool tracked = x.requires_grad();
  auto y = inner(tracked ? PostBackward::apply(x, this, static_cast<int64_t>(u)) : x);
  if (y.requires_grad()) y = PreBackward::apply(y, this, static_cast<int64_t>(u));
  release(u);
  return y;
}

void Stage3Strategy::on_pre_backward(size_t u) {
  at::NoGradGuard no_grad;
  gather(u);
  prefetch(u, -1);
}

void Stage3Strategy::on_post_backward(size_t u) {
  at::NoGradGuard no_grad;
  auto& st = units_[u];
  if (!st.needs_reduce) return;
  const auto& unit = sl_.units[u];
  auto staging = at::zeros({unit.numel}, reduce_dtype_);
  for (int i = unit.first_slot; i < unit.end_slot; ++i) {
    auto& p = named_[i].second;
    const at::Tensor g = p.grad();
    if (!g.defined()) continue;
    const auto& s = sl_.flat.slots[i];
    staging.narrow(0, s.offset - unit.begin, s.numel).copy_(g.reshape({-1}));
    p.mutable_grad() = at::Tensor();
  }
  st.needs_reduce = false;
  release(u);
  reduce_unit(u, std::move(staging));
}

void Stage3Strategy::reduce_unit(size_t u, at::Tensor staging) {
  inflight_.push_back({u, UnitReduction(*dp_, staging, reduce_options_)});
  drain(options_.zero.overlap() ? 2 : 0);
}

void Stage3Strategy::drain(size_t keep) {
  while (inflight_.size() > keep) {
    auto f = std::move(inflight_.front());
    inflight_.pop_front();
    const auto& unit = sl_.units[f.unit];
    part_grad_.narrow(0, unit.local, unit.shard).add_(f.reduction.wait());
  }
}

void Stage3Strategy::before_backward(bool /*boundary*/) {}

// Units whose PostBackward did not run (an input without grad: the first unit of a Sequential fed
// the raw batch) are reduced now, in reverse order as autograd would; then the persistent buckets.
void Stage3Strategy::after_backward(bool /*boundary*/) {
  at::NoGradGuard no_grad;
  for (size_t u = partitioned_; u-- > 0;) on_post_backward(u);
  for (size_t u = 0; u < partitioned_; ++u) release(u);  // prefetched for a backward that did not come
  for (size_t u = sl_.units.size(); u-- > partitioned_;) {
    const auto& unit = sl_.units[u];
    reduce_unit(u, persist_grads_.narrow(0, unit.begin - persist_begin_, unit.numel).to(reduce_dtype_, /*non_blocking=*/false,
                                                                                         /*copy=*/true));
  }
  drain(0);
  persist_grads_.zero_();
}

void Stage3Strategy::reduce() {
  at::NoGradGuard no_grad;
  if (post_after_ != 1.0) part_grad_.mul_(post_after_);
}

double Stage3Strategy::grad_norm_squared() { return shard_grad_norm_squared(part_grad_, norm_ranges_, *dp_); }

void Stage3Strategy::step(const StepHyper& h) {
  auto in = shard_step_inputs(master_, part_grad_, segments_, h);
  at::NoGradGuard no_grad;
  if (nvme_ && param_file_) {
    in.params = at::Tensor();
    nvme_->step(in, [this](int64_t local, const at::Tensor& values) { write_shard(local, values.to(dtype_)); });
  } else if (nvme_) {
    in.params = at::Tensor();
    nvme_->step(in, param_shard_);
  } else {
    optimizer_->step(in);
    if (param_file_) {
      const int64_t chunk = options_.zero.sub_group_size, n = sl_.shard_numel();
      for (int64_t off = 0; off < n; off += chunk) write_shard(off, master_.narrow(0, off, std::min(chunk, n - off)).to(dtype_));
    } else if (!param_shard_.is_same(master_)) {
      param_shard_.copy_(master_);
    }
  }
  std::vector<comm::Work> works;  // persistent parameters: own shard back into every rank's copy
  for (size_t u = partitioned_; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    auto whole = persist_.narrow(0, unit.begin - persist_begin_, unit.numel);
    auto own = whole.narrow(0, rank_ * unit.shard, unit.shard);
    own.copy_(shard_of(u));
    works.push_back(dp_->all_gather(own, whole, /*async=*/true));
  }
  for (auto& w : works) w.wait();
}

void Stage3Strategy::zero_grads() {
  persist_grads_.zero_();
  part_grad_.zero_();
}

std::string Stage3Strategy::optimizer_name() const { return nvme_ ? nvme_->optimizer_name() : optimizer_->name(); }
int64_t Stage3Strategy::optimizer_step_count() const {
  return nvme_ ? nvme_->step_count() : optimizer_->step_count();
}
void Stage3Strategy::set_optimizer_step_count(int64_t n) {
  if (nvme_) {
    nvme_->set_step_count(n);
  } else {
    optimizer_->set_step_count(n);
  }
}

MemoryReport Stage3Strategy::memory() const {
  MemoryReport r;
  r.param_bytes = (param_shard_.is_same(master_) ? 0 : bytes(param_shard_)) + bytes(persist_);
  if (param_file_) r.disk_bytes += param_file_bytes();
  r.grad_bytes = bytes(part_grad_) + bytes(persist_grads_);
  if (nvme_) {  // in memory only the chunk buffers, master and states in equal parts
    r.master_bytes = nvme_->buffer_bytes() / static_cast<int64_t>(1 + nvme_->state_names().size());
    r.optimizer_bytes = nvme_->buffer_bytes() - r.master_bytes;
    r.disk_bytes += nvme_->disk_bytes();
    return r;
  }
  r.master_bytes = bytes(master_);
  for (auto& [name, t] : optimizer_->state()) r.optimizer_bytes += bytes(t);
  return r;
}

NamedParams Stage3Strategy::gathered_parameters() {
  at::NoGradGuard no_grad;
  auto full = at::empty({sl_.flat.numel}, at::kFloat);
  for (size_t u = 0; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    const auto own = master_.defined() ? master_.narrow(0, unit.local, unit.shard) : shard_of(u);
    dp_->all_gather(own.to(at::kFloat), full.narrow(0, unit.begin, unit.numel));
  }
  std::map<std::string, at::Tensor> by_name;
  for (const auto& s : sl_.flat.slots) by_name[s.name] = full.narrow(0, s.offset, s.numel).view(s.shape).to(dtype_);
  NamedParams out;
  for (const auto& name : given_names_) out.emplace_back(name, by_name.at(name));
  return out;
}

void Stage3Strategy::save(checkpoint::CheckpointWriter& writer) const {
  NamedBuffers buffers;
  if (nvme_) {
    buffers.emplace_back("master", nvme_->read("master"));
    for (const auto& name : nvme_->state_names()) buffers.emplace_back(name, nvme_->read(name));
  } else {
    buffers.emplace_back("master", master_);
    for (auto& [name, t] : optimizer_->state()) buffers.emplace_back(name, t);
  }
  save_shards(writer, sl_, rank_, 3, buffers);
}

void Stage3Strategy::load(const checkpoint::CheckpointReader& reader, bool load_optimizer) {
  at::NoGradGuard no_grad;
  const auto full = consolidate(reader, load_optimizer);
  NamedBuffers buffers;
  if (nvme_) {  // filled in memory, then written to the files
    buffers.emplace_back("master", at::zeros({sl_.shard_numel()}, at::kFloat));
    if (load_optimizer) {
      for (const auto& name : nvme_->state_names()) buffers.emplace_back(name, nvme_->read(name));
    }
  } else {
    buffers.emplace_back("master", master_);
    if (load_optimizer) {
      for (auto& [name, t] : optimizer_->state()) buffers.emplace_back(name, t);
    }
  }
  load_shards(full, sl_, rank_, buffers);
  if (!options_.zero.load_from_fp32_weights) round_master(buffers, dtype_);
  if (nvme_) {
    for (const auto& [name, t] : buffers) nvme_->write(name, t);
  }
  std::map<std::string, at::Tensor> model(full.model.begin(), full.model.end());
  // The model's low-precision values as saved (not re-rounded from the master).
  auto flat = at::zeros({sl_.flat.numel}, dtype_);
  for (const auto& s : sl_.flat.slots) flat.narrow(0, s.offset, s.numel).copy_(model.at(s.name).reshape({-1}));
  for (size_t u = 0; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    if (!param_shard_.is_same(master_) || param_file_) {  // (with nvme offload master_ is undefined)
      write_shard(unit.local, flat.narrow(0, sl_.owned_begin(u, rank_), unit.shard));
    }
  }
  persist_.copy_(flat.narrow(0, persist_begin_, sl_.flat.numel - persist_begin_));
  zero_grads();
}

}  // namespace xtrain::zero
