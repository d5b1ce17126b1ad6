// Plumbing shared by the flat-buffer optimizers (internal to optim/): checking StepInputs, the
// segment list (one segment over the whole buffer when none is given), the per-group hyper-
// parameters, and a parallel walk over the segments' elements. The walk splits by element ranges
// (at::parallel_for, grain kGrain), so the split never changes an element's arithmetic.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "xtrain/optim/cpu/kernels.h"
#include "xtrain/optim/optimizer.h"

namespace xtrain::optim::detail {

// Elements per parallel task (~128 KiB of fp32 per stream).
constexpr int64_t kGrain = 32768;

// Checks buffers, dtypes, sizes, devices and segments against the state size (`who` names the
// optimizer in errors); CUDA tensors only when allow_cuda. Returns in.segments, or `whole` filled
// with one segment covering every element.
const std::vector<Segment>& checked_segments(const StepInputs& in, int64_t state_numel, const std::string& who,
                                             std::vector<Segment>& whole, bool allow_cuda = false);

// in.groups, or one group with the configured lr and weight decay when the caller gave none.
std::vector<GroupHyper> groups_or(const StepInputs& in, double lr, double weight_decay);

// beta1/beta2 for this step: the OneCycle overrides when set, else the configured betas.
std::pair<double, double> step_betas(const StepInputs& in, const std::vector<double>& betas);

cpu::FlatBuffers flat_buffers(const StepInputs& in, const at::Tensor& state0, const at::Tensor& state1);

// Calls fn(segment_index, begin, end) for every element range of the segments, in parallel.
void parallel_over_segments(const std::vector<Segment>& segments,
                            const std::function<void(size_t, int64_t, int64_t)>& fn);

}  // namespace xtrain::optim::detail
