// BucketReducer: per-bucket ready counters filled by AccumulateGrad post-hooks; buckets launch in
// index order only (bucket k waits for k-1), so every rank issues the same collective sequence even
// when hooks fire in a different order or some parameters are unused. Launched buckets complete in
// launch order (a queue of completions, optionally bounded).
#include "xtrain/parallel/data/bucket_reducer.h"

#include <ATen/ops/cat.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <deque>
#include <map>
#include <mutex>

#include "xtrain/comm/communicator.h"

namespace xtrain::parallel {

struct BucketReducer::State {
  std::shared_ptr<comm::Communicator> comm;
  std::vector<ReducerParam> params;
  at::Tensor buffer;
  ReducerOptions options;
  BucketReady on_ready;
  BucketCollective collective;  // the caller's; empty: all_reduce() below
  GradArrived arrived;
  bool overlap = true;
  int max_in_flight = -1;
  std::vector<BucketSpec> buckets;
  std::vector<int> bucket_of;  // param index -> bucket
  GradScaling scaling;

  std::mutex mutex;
  bool boundary = true;
  std::vector<char> param_ready;
  std::vector<int> pending;  // per bucket: parameters still without their gradient
  int next_launch = 0;       // buckets [0, next_launch) are launched
  std::deque<BucketDone> in_flight;  // oldest first
  std::vector<std::pair<int, at::Tensor>> wire;  // cast buckets in flight: bucket, its copy in the wire dtype
  ReducerStats stats;

  bool communicates() const { return comm && comm->size() > 1; }
  bool casts() const {
    return options.communication_dtype != at::ScalarType::Undefined &&
           options.communication_dtype != buffer.scalar_type();
  }

  void reset() {
    param_ready.assign(params.size(), 0);
    pending.resize(buckets.size());
    for (size_t b = 0; b < buckets.size(); ++b) pending[b] = static_cast<int>(buckets[b].params.size());
    next_launch = 0;
    in_flight.clear();
    wire.clear();
  }

  void index_buckets() {
    bucket_of.assign(params.size(), 0);
    for (size_t b = 0; b < buckets.size(); ++b) {
      for (int i : buckets[b].params) bucket_of[i] = static_cast<int>(b);
    }
  }

  void launch(int b) {  // caller holds mutex
    BucketDone done = collective ? collective(b) : all_reduce(b);
    if (done) in_flight.push_back(std::move(done));
    if (max_in_flight >= 0) complete(static_cast<size_t>(max_in_flight));
  }

  void complete(size_t keep) {  // caller holds mutex
    while (in_flight.size() > keep) {
      BucketDone done = std::move(in_flight.front());
      in_flight.pop_front();
      done();
    }
  }

  // The default collective: the bucket's slice of the buffer summed over ranks (pre-scaled, and cast
  // to communication_dtype when set); the post-scale waits for finish().
  BucketDone all_reduce(int b) {
    const auto& spec = buckets[b];
    if (on_ready) on_ready(spec.begin, spec.end);
    if (!communicates()) return nullptr;
    at::Tensor slice = buffer.narrow(0, spec.begin, spec.numel());
    if (casts()) {
      slice = slice.to(options.communication_dtype);
      wire.emplace_back(b, slice);
    }
    if (scaling.pre != 1.0) slice.mul_(scaling.pre);
    comm::Work work = comm->all_reduce(slice, comm::ReduceOp::kSum, /*async=*/true);
    return [work]() mutable { work.wait(); };
  }

  // After the buckets' sums arrived: the post-scale, in the wire dtype for cast buckets.
  void post_scale() {
    if (!casts()) {
      if (scaling.post != 1.0) buffer.mul_(scaling.post);
      return;
    }
    for (auto& [b, w] : wire) {
      if (scaling.post != 1.0) w.mul_(scaling.post);
      buffer.narrow(0, buckets[b].begin, buckets[b].numel()).copy_(w);
    }
  }

  void launch_ready() {  // caller holds mutex
    while (next_launch < static_cast<int>(buckets.size()) && pending[next_launch] == 0) {
      launch(next_launch++);
      stats.buckets_in_backward += 1;
    }
  }

  void check_grad_is_view(int i) const {
    const auto& p = params[i];
    const at::Tensor& g = p.param.grad();
    TORCH_CHECK(g.defined() && g.data_ptr() == static_cast<char*>(buffer.data_ptr()) + p.offset * buffer.element_size(),
                "BucketReducer: parameter ", i, "'s .grad is not a view of its slot in the reduce buffer (offset ",
                p.offset, "); bind gradients to the buffer or pass on_ready to copy them");
  }

  void on_grad(int i) {
    std::lock_guard<std::mutex> lock(mutex);
    if (arrived && !arrived(i, param_ready[i] != 0)) return;
    if (!boundary) return;
    if (!on_ready && !collective) check_grad_is_view(i);
    const int b = bucket_of[i];
    TORCH_CHECK(!param_ready[i] || b >= next_launch, "BucketReducer: parameter ", i,
                " got a second gradient in one backward after its bucket was sent; call finish() between backwards");
    if (param_ready[i]) return;
    param_ready[i] = 1;
    if (--pending[b] == 0 && overlap) launch_ready();
  }
};

namespace {

struct ReadyHook : torch::autograd::FunctionPostHook {
  ReadyHook(std::weak_ptr<BucketReducer::State> state, int index) : state_(std::move(state)), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    if (auto s = state_.lock()) s->on_grad(index_);
    return outputs;
  }
  std::weak_ptr<BucketReducer::State> state_;
  int index_;
};

}  // namespace

BucketReducer::BucketReducer(std::shared_ptr<comm::Communicator> comm, std::vector<ReducerParam> params,
                             at::Tensor buffer, const ReducerOptions& options, BucketReady on_ready)
    : state_(std::make_shared<State>()) {
  TORCH_CHECK(buffer.dim() == 1 && buffer.is_contiguous(), "BucketReducer: the reduce buffer must be 1-D contiguous");
  auto& s = *state_;
  s.comm = std::move(comm);
  s.params = std::move(params);
  s.buffer = std::move(buffer);
  s.options = options;
  s.overlap = options.overlap;
  s.on_ready = std::move(on_ready);
  std::vector<SlotRange> slots;
  for (const auto& p : s.params) slots.push_back({p.offset, p.numel});
  s.buckets = plan_buckets(slots, s.buffer.numel(), options.bucket_size);
  const int64_t world = s.comm ? s.comm->size() : 1;
  s.scaling = world > 1 ? gradient_scaling(world, options.prescale_gradients, options.gradient_predivide_factor)
                        : GradScaling{};
  install_hooks();
}

BucketReducer::BucketReducer(std::vector<ReducerParam> params, CollectiveOptions options, BucketCollective collective)
    : state_(std::make_shared<State>()) {
  TORCH_CHECK(collective, "BucketReducer: a collective is required");
  auto& s = *state_;
  s.params = std::move(params);
  s.buckets = std::move(options.buckets);
  s.overlap = options.overlap;
  s.max_in_flight = options.max_in_flight;
  s.arrived = std::move(options.on_grad);
  s.collective = std::move(collective);
  install_hooks();
}

// Hooks hold the state weakly: one that fires after the reducer is gone does nothing.
void BucketReducer::install_hooks() {
  auto& s = *state_;
  s.index_buckets();
  s.reset();
  for (size_t i = 0; i < s.params.size(); ++i) {
    const auto& p = s.params[i].param;
    TORCH_CHECK(p.requires_grad() && p.is_leaf(), "BucketReducer: parameter ", i, " must be a leaf requiring grad");
    auto node = torch::autograd::impl::grad_accumulator(p);  // kept alive: the hook lives on this node
    const uintptr_t key = node->add_post_hook(std::make_unique<ReadyHook>(state_, static_cast<int>(i)));
    hooks_.emplace_back(std::move(node), key);
  }
}

BucketReducer::~BucketReducer() {
  for (auto& [node, key] : hooks_) node->del_post_hook(key);
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (auto& done : state_->in_flight) {
    try {
      done();  // never leave a collective in flight on a buffer that may be freed
    } catch (const std::exception&) {
    }
  }
}

void BucketReducer::set_boundary(bool boundary) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->boundary = boundary;
  if (boundary) state_->reset();
}

void BucketReducer::finish() {
  using Clock = std::chrono::steady_clock;
  auto& s = *state_;
  std::unique_lock<std::mutex> lock(s.mutex);
  TORCH_CHECK(s.boundary, "BucketReducer: finish() outside the accumulation boundary (call set_boundary(true) first)");
  while (s.next_launch < static_cast<int>(s.buckets.size())) {
    s.launch(s.next_launch++);
    s.stats.buckets_at_finish += 1;
  }
  auto in_flight = std::move(s.in_flight);
  s.in_flight.clear();
  lock.unlock();
  const auto t0 = Clock::now();
  for (auto& done : in_flight) done();
  lock.lock();
  s.stats.finish_wait_s += std::chrono::duration<double>(Clock::now() - t0).count();
  if (s.collective) {
    s.stats.steps += 1;
  } else if (s.communicates()) {
    s.stats.steps += 1;
    s.post_scale();
  }
  s.reset();
}

void BucketReducer::launch(int b) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->launch(b);
}

void BucketReducer::complete(size_t keep) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->complete(keep);
}

const std::vector<BucketSpec>& BucketReducer::buckets() const { return state_->buckets; }
GradScaling BucketReducer::scaling() const { return state_->scaling; }

ReducerStats BucketReducer::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

void broadcast_parameters(comm::Communicator& comm, const std::vector<at::Tensor>& params, int root) {
  if (comm.size() <= 1) return;
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const auto& p : params) by_dtype[p.scalar_type()].push_back(p);
  at::NoGradGuard no_grad;
  for (auto& [dtype, tensors] : by_dtype) {
    std::vector<at::Tensor> flat;
    for (const auto& t : tensors) flat.push_back(t.detach().reshape({-1}));
    at::Tensor buf = at::cat(flat);
    comm.broadcast(buf, root);
    int64_t off = 0;
    for (auto& t : tensors) {
      t.detach().copy_(buf.narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
  }
}

}  // namespace xtrain::parallel
