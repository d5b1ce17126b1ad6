// plan_buckets and gradient_scaling: see the header.
#include "xtrain/parallel/data/bucket_plan.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>

#include "xtrain/base/error.h"

namespace xtrain::parallel {

std::vector<BucketSpec> plan_buckets(const std::vector<SlotRange>& slots, int64_t total, int64_t bucket_size) {
  XTRAIN_USAGE_CHECK(bucket_size > 0, "data parallel: zero_optimization.reduce_bucket_size must be > 0, got ",
                     bucket_size);
  std::vector<int> order(slots.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return slots[a].offset > slots[b].offset; });
  std::vector<BucketSpec> buckets;
  BucketSpec current;
  current.end = total;
  int64_t filled = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const SlotRange& s = slots[order[k]];
    TORCH_CHECK(s.offset >= 0 && s.offset + s.numel <= current.end, "plan_buckets: slot at ", s.offset, " (", s.numel,
                " elements) overlaps another or lies outside the buffer of ", total);
    current.params.push_back(order[k]);
    filled += s.numel;
    current.begin = s.offset;
    if (filled >= bucket_size && k + 1 < order.size()) {
      buckets.push_back(current);
      current = BucketSpec{};
      current.end = s.offset;
      filled = 0;
    }
  }
  current.begin = 0;  // the last bucket also takes any leading padding
  buckets.push_back(current);
  return buckets;
}

GradScaling gradient_scaling(int64_t world, bool prescale_gradients, double gradient_predivide_factor) {
  XTRAIN_USAGE_CHECK(gradient_predivide_factor > 0, "data parallel: gradient_predivide_factor must be > 0, got ",
                     gradient_predivide_factor);
  const double w = static_cast<double>(world);
  if (prescale_gradients) return {1.0 / w, 1.0};
  const double f = gradient_predivide_factor;
  return {f != 1.0 ? 1.0 / f : 1.0, f != w ? f / w : 1.0};
}

}  // namespace xtrain::parallel
