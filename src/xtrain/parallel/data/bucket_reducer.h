// BucketReducer: averages gradients over the data-parallel group in buckets (bucket_plan.h), each
// launched as an async all-reduce from autograd hooks as soon as its parameters' gradients are
// final, so communication overlaps the rest of backward (overlap_comm); buckets are launched in
// one fixed order on every rank. Hooks are post-hooks on each parameter's AccumulateGrad node:
// the gradient is already in the flat buffer when they run. Reference: PyTorch DDP's Reducer and
// DeepSpeed's IPG buckets (engine.allreduce_gradients), without either's dtype or engine coupling.
// Because launch order is fixed, a parameter that gets no gradient holds back its bucket and every
// later one until finish() (correct, less overlap): unused parameters are best early in the layout.
// The collective is the caller's choice: by default an all-reduce of the bucket's slice of one flat
// buffer (stage 0); ZeRO passes its own (a reduce-scatter into a shard, zero/grad_path.h) with
// explicit buckets, a bound on buckets in flight, and may launch buckets itself (stage 3's units).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "xtrain/parallel/data/bucket_plan.h"

namespace torch::autograd {
struct Node;
}
namespace xtrain::comm {
class Communicator;
}

namespace xtrain::parallel {

struct ReducerOptions {
  int64_t bucket_size = 500000000;       // elements: zero_optimization.reduce_bucket_size
  bool overlap = true;                   // zero_optimization.overlap_comm; false: all at finish()
  bool prescale_gradients = false;       // DeepSpeed keys, see gradient_scaling()
  double gradient_predivide_factor = 1.0;
  // communication_data_type: a bucket of another dtype is cast to this one, multiplied by the
  // pre-scale, summed, multiplied by the post-scale and cast back, all in this dtype (DeepSpeed's
  // engine.allreduce_bucket). Undefined: the buffer's own dtype.
  at::ScalarType communication_dtype = at::ScalarType::Undefined;
};

// Completes one launched bucket: waits for its collective and puts the result where it belongs.
using BucketDone = std::function<void()>;
// Launches bucket b's collective (asynchronously) and returns what completes it (may be empty).
using BucketCollective = std::function<BucketDone(int bucket)>;
// Called from parameter i's gradient hook on every backward, boundary or not, under the reducer's
// lock; `again`: i already counted in this backward. Returns whether the gradient counts as arrived.
using GradArrived = std::function<bool(int param, bool again)>;

struct CollectiveOptions {
  std::vector<BucketSpec> buckets;  // launched in index order; their `params` index the parameters
  bool overlap = true;              // launch from the hooks as soon as a bucket is complete
  int max_in_flight = -1;           // after each launch, complete the oldest until this many remain; -1: any
  GradArrived on_grad;              // optional
};

struct ReducerParam {
  at::Tensor param;   // a leaf that requires grad
  int64_t offset = 0; // its slot in the reduce buffer
  int64_t numel = 0;
};

struct ReducerStats {
  int64_t steps = 0;                // finish() calls that communicated
  int64_t buckets_in_backward = 0;  // launched from hooks (overlapped)
  int64_t buckets_at_finish = 0;    // launched by finish() (overlap off, or unused parameters)
  double finish_wait_s = 0.0;       // time finish() spent waiting: communication not hidden
};

class BucketReducer {
 public:
  // Called with [begin, end) of the buffer just before that bucket is sent (on the thread that
  // launches it): the place to fill the buffer from the gradients, e.g. bf16 .grad -> fp32 buffer.
  using BucketReady = std::function<void(int64_t begin, int64_t end)>;

  // `buffer` is 1-D; without `on_ready` every parameter's .grad must be a view of its slot (checked
  // in the hook). Construct after the parameters are bound to their flat storage: a later set_data
  // with another dtype replaces the AccumulateGrad node and loses the hook.
  BucketReducer(std::shared_ptr<comm::Communicator> comm, std::vector<ReducerParam> params, at::Tensor buffer,
                const ReducerOptions& options, BucketReady on_ready = nullptr);
  // The caller's collective over explicit buckets; no buffer, no scaling (the collective does both).
  // `params` may be empty: buckets are then launched only by launch() and finish().
  BucketReducer(std::vector<ReducerParam> params, CollectiveOptions options, BucketCollective collective);
  ~BucketReducer();
  BucketReducer(const BucketReducer&) = delete;
  BucketReducer& operator=(const BucketReducer&) = delete;

  // Before each micro-batch's backward: true on the accumulation boundary. Hooks act only then, so
  // with gradient accumulation nothing is communicated until the last micro-batch.
  void set_boundary(bool boundary);
  // After the boundary backward: launches the buckets not yet sent (overlap off, or parameters that
  // got no gradient), waits for all, applies the post-scale. The buffer then holds the mean.
  void finish();
  // Bucket b's collective now, whatever its parameters' state (stage 3: a unit whose backward is done).
  void launch(int b);
  // Completes launched buckets, oldest first, until at most `keep` are in flight.
  void complete(size_t keep = 0);

  const std::vector<BucketSpec>& buckets() const;
  GradScaling scaling() const;
  ReducerStats stats() const;

  struct State;

 private:
  void install_hooks();
  std::shared_ptr<State> state_;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;  // AccumulateGrad, key
};

// Copies root's values into every rank's tensors (one broadcast per dtype, coalesced).
void broadcast_parameters(comm::Communicator& comm, const std::vector<at::Tensor>& params, int root = 0);

}  // namespace xtrain::parallel
