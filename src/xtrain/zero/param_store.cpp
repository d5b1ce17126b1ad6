#include "xtrain/zero/param_store.h"
#include "xtrain/zero/shard_ops.h"

#include <ATen/Functions.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "xtrain/base/error.h"
#include "xtrain/zero/offload/disk_backed_allocations.h"
#include "xtrain/zero/offload/uring_file.h"

namespace xtrain::zero {

ParameterStore::ParameterStore(NamedParams& named, const ShardLayout& layout, size_t partitioned,
                               const StrategyOptions& options, comm::Communicator& dp, const at::Tensor& master)
    : named_(named), sl_(layout), partitioned_(partitioned), options_(options), dp_(dp), dtype_(options.param_dtype) {
  units_.resize(sl_.units.size());
  persist_begin_ = partitioned_ < sl_.units.size() ? sl_.units[partitioned_].begin : sl_.flat.numel;
  released_ = at::empty({0}, at::TensorOptions().dtype(dtype_));
  if (options_.zero.offload_param.device == "nvme") {
    open_param_file();
  } else if (master.defined() && dtype_ == at::kFloat) {
    param_shard_ = master;
    shard_is_master_ = true;
  } else {
    param_shard_ = at::empty({sl_.shard_numel()}, dtype_);
  }
  persist_ = at::empty({sl_.flat.numel - persist_begin_}, dtype_);
}

// This rank's parameter shards in a file, read on gather.
void ParameterStore::open_param_file() {
  const auto& dir = options_.zero.offload_param.nvme_path;
  require_nvme_folder(dir, "zero_optimization.offload_param.nvme_path");
  std::error_code ec;
  check_aio_options(options_.aio);
  const auto space = std::filesystem::space(dir, ec);
  const int64_t available = ec ? -1 : static_cast<int64_t>(space.available);
  const int64_t freed_later = disk_backed_bytes_freed_on_node();  // the model's construction blocks
  XTRAIN_USAGE_CHECK(available < 0 || available + freed_later >= file_bytes(), "zero: not enough free space ",
                     "for the parameter shards in ", dir, ": need ", file_bytes(), " bytes, available ", available,
                     " (zero_optimization.offload_param.nvme_path)");
  param_file_ = std::make_unique<UringFile>(c10::str(dir, "/xtrain_params_rank", dp_.rank(), "_", ::getpid(), ".bin"),
                                            options_.aio);
  param_file_->allocate(file_bytes(), /*reserve=*/available < 0 || available >= file_bytes());
}

ParameterStore::~ParameterStore() {
  if (param_file_) {
    const std::string path = param_file_->path();
    param_file_.reset();
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  for (auto& st : units_) {
    try {
      if (st.in_flight) st.work.wait();
    } catch (const std::exception&) {
    }
  }
}

void ParameterStore::initialize(ShardedOptimizerState& state) {
  at::NoGradGuard no_grad;
  const int64_t rank = dp_.rank();
  for (size_t u = 0; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    auto full = at::zeros({unit.numel}, at::kFloat);
    for (int i = unit.first_slot; i < unit.end_slot; ++i) {
      const auto& s = sl_.flat.slots[i];
      full.narrow(0, s.offset - unit.begin, s.numel).copy_(named_[i].second.reshape({-1}));
    }
    if (dp_.distributed()) dp_.broadcast(full, 0);
    const auto own = full.narrow(0, rank * unit.shard, unit.shard);
    state.initialize(unit.local, own);
    if (!shard_is_master_) write_shard(unit.local, own);
    const bool partitioned = u < partitioned_;
    if (!partitioned) persist_.narrow(0, unit.begin - persist_begin_, unit.numel).copy_(full);
    for (int i = unit.first_slot; i < unit.end_slot; ++i) {
      const auto& s = sl_.flat.slots[i];
      named_[i].second.set_data(partitioned ? released_
                                            : persist_.narrow(0, s.offset - persist_begin_, s.numel).view(s.shape));
    }
  }
  bind_persistent_grads();
}

void ParameterStore::bind_persistent_grads() {
  persist_grads_ = at::zeros_like(persist_);
  for (size_t i = 0; i < named_.size(); ++i) {
    const auto& s = sl_.flat.slots[i];
    if (static_cast<size_t>(sl_.unit_of_slot[i]) < partitioned_) continue;
    named_[i].second.mutable_grad() = persist_grads_.narrow(0, s.offset - persist_begin_, s.numel).view(s.shape);
  }
}

int64_t ParameterStore::file_bytes() const {
  return sl_.shard_numel() * static_cast<int64_t>(c10::elementSize(dtype_));
}

at::Tensor ParameterStore::shard_of(size_t u) const {
  const auto& unit = sl_.units[u];
  if (!param_file_) return param_shard_.narrow(0, unit.local, unit.shard);
  auto out = at::empty({unit.shard}, at::TensorOptions().dtype(dtype_));
  const int64_t size = static_cast<int64_t>(c10::elementSize(dtype_));
  param_file_->read(out.data_ptr(), unit.shard * size, unit.local * size);
  return out;
}

void ParameterStore::write_shard(int64_t local, const at::Tensor& values) {
  if (!param_file_) {
    param_shard_.narrow(0, local, values.numel()).copy_(values);
    return;
  }
  const auto v = values.to(dtype_).contiguous();
  const int64_t size = static_cast<int64_t>(c10::elementSize(dtype_));
  param_file_->write(v.data_ptr(), v.numel() * size, local * size);
}

// The parameter file is written in sub_group_size pieces, so the low-precision copy of the master
// never needs a shard-sized buffer.
void ParameterStore::update(int64_t local, const at::Tensor& master) {
  if (shard_is_master_) return;
  if (!param_file_) {
    write_shard(local, master);
    return;
  }
  const int64_t chunk = options_.zero.sub_group_size, n = master.numel();
  for (int64_t off = 0; off < n; off += chunk) {
    write_shard(local + off, master.narrow(0, off, std::min(chunk, n - off)).to(dtype_));
  }
}

void ParameterStore::start_gather(size_t u) {
  auto& st = units_[u];
  if (st.full.defined()) return;
  const auto& unit = sl_.units[u];
  st.full = at::empty({unit.numel}, at::TensorOptions().dtype(dtype_));
  st.work = dp_.all_gather(shard_of(u), st.full, /*async=*/true);
  st.in_flight = true;
  live_ += unit.numel;
  peak_live_ = std::max(peak_live_, live_);
  ++gathers_;
}

void ParameterStore::gather(size_t u) {
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

void ParameterStore::release(size_t u) {
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

// Depends on sizes and order only, so every rank issues the same gathers.
void ParameterStore::prefetch(size_t from, int direction) {
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

void ParameterStore::refresh_persistent() {
  std::vector<comm::Work> works;
  for (size_t u = partitioned_; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    auto whole = persist_.narrow(0, unit.begin - persist_begin_, unit.numel);
    auto own = whole.narrow(0, dp_.rank() * unit.shard, unit.shard);
    own.copy_(shard_of(u));
    works.push_back(dp_.all_gather(own, whole, /*async=*/true));
  }
  for (auto& w : works) w.wait();
}

// The model's low-precision values as saved (not re-rounded from the master).
void ParameterStore::load(const at::Tensor& flat) {
  for (size_t u = 0; u < sl_.units.size(); ++u) {
    const auto& unit = sl_.units[u];
    if (!shard_is_master_) write_shard(unit.local, flat.narrow(0, sl_.owned_begin(u, dp_.rank()), unit.shard));
  }
  persist_.copy_(flat.narrow(0, persist_begin_, sl_.flat.numel - persist_begin_));
}

at::Tensor ParameterStore::persistent_grad(size_t u) const {
  const auto& unit = sl_.units[u];
  return persist_grads_.narrow(0, unit.begin - persist_begin_, unit.numel);
}

void ParameterStore::zero_persistent_grads() { persist_grads_.zero_(); }

int64_t ParameterStore::param_bytes() const { return (shard_is_master_ ? 0 : tensor_bytes(param_shard_)) + tensor_bytes(persist_); }
int64_t ParameterStore::disk_bytes() const { return param_file_ ? file_bytes() : 0; }
int64_t ParameterStore::grad_bytes() const { return tensor_bytes(persist_grads_); }

}  // namespace xtrain::zero
