// How one unit of gradients (W equal slices in the strategy's reduce dtype) becomes this rank's
// slice of the sum over data-parallel ranks, for stages 1-3: a reduce-scatter, or with
// `zero_optimization.reduce_scatter: false` an all-reduce of the whole unit of which the rank keeps
// its slice; either optionally through `communication_data_type` (cast there, summed, cast back).
// Scaling follows DeepSpeed: without a cast the pre-scale comes before the sum and the strategy
// applies the post-scale at reduce() (post_after()); with a cast, a reduce-scatter applies all of it
// before the sum (stage_1_and_2.average_tensor divides by W first, so fp16 sums cannot overflow) and
// an all-reduce scales before and after the sum in the wire dtype (gradient_reduction_w_predivide).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "xtrain/comm/communicator.h"

namespace xtrain::zero {

struct UnitReduceOptions {
  bool reduce_scatter = true;                          // zero_optimization.reduce_scatter
  at::ScalarType wire = at::ScalarType::Undefined;     // communication_data_type; Undefined: no cast
  double pre = 1.0, post = 1.0;                        // parallel::gradient_scaling()

  bool casts(at::ScalarType dtype) const { return wire != at::ScalarType::Undefined && wire != dtype; }
  // What the caller still multiplies the reduced gradients by.
  double post_after(at::ScalarType dtype) const { return casts(dtype) ? 1.0 : post; }
};

// One unit's reduction in flight (asynchronous, like the collective it runs).
class UnitReduction {
 public:
  UnitReduction() = default;
  // `input` (size() slices) may be scaled in place; keep it unchanged otherwise until wait().
  UnitReduction(comm::Communicator& dp, const at::Tensor& input, const UnitReduceOptions& options);
  // This rank's slice of the reduced unit, in the input's dtype.
  at::Tensor wait();

 private:
  at::ScalarType dtype_ = at::kFloat;
  bool cast_ = false;
  double after_ = 1.0;  // in the wire dtype, after the sum
  at::Tensor buffer_, out_;
  comm::Work work_;
};

// The same, synchronous and in place, for stage 1's single unit (the whole model): afterwards this
// rank's slice of `input` (reduce-scatter) or all of it (all-reduce) holds the result. With a cast
// it goes in pieces of at most `piece` elements per slice, so the wire-dtype copy is W pieces, not
// a second copy of the model's gradients.
void reduce_in_place(comm::Communicator& dp, const at::Tensor& input, const UnitReduceOptions& options,
                     int64_t piece);

// communication_data_type as a dtype: "" -> Undefined, "fp32"/"fp16"/"bf16" (any case).
at::ScalarType communication_dtype(const std::string& name);

}  // namespace xtrain::zero
