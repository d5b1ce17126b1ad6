// Gradient buckets as pure arithmetic: contiguous ranges of a flat gradient buffer, cut on parameter
// boundaries (a parameter is never split; one larger than the bucket size is a bucket of its own),
// in reverse layout order because autograd produces the last layers' gradients first. Buckets
// cover the whole buffer, padding included, so a reduce-scatter per bucket (ZeRO) sees every
// element once. Also DeepSpeed's gradient pre/post scaling (engine.allreduce_bucket).
#pragma once
#include <cstdint>
#include <vector>

namespace xtrain::parallel {

struct SlotRange {
  int64_t offset = 0;  // into the flat buffer
  int64_t numel = 0;
};

struct BucketSpec {
  int64_t begin = 0, end = 0;   // [begin, end) of the flat buffer
  std::vector<int> params;      // indices into the slot list
  int64_t numel() const { return end - begin; }
};

// Bucket 0 holds the last parameters (highest offsets) and ends at `total`; the last bucket starts
// at 0. A bucket closes once it holds >= bucket_size elements of parameters. Slots must not overlap.
std::vector<BucketSpec> plan_buckets(const std::vector<SlotRange>& slots, int64_t total, int64_t bucket_size);

// Multiply gradients by `pre` before the sum over ranks and by `post` after, so the result is the
// mean over `world` ranks: prescale_gradients divides by world first; otherwise
// gradient_predivide_factor f divides by f before and by world/f after (DeepSpeed's semantics).
struct GradScaling {
  double pre = 1.0;
  double post = 1.0;
};
GradScaling gradient_scaling(int64_t world, bool prescale_gradients, double gradient_predivide_factor);

}  // namespace xtrain::parallel
