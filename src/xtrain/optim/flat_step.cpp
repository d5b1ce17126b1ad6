// Checks and parallel segment walk shared by Adam, SGD and Lamb (see flat_step.h).
#include "xtrain/optim/flat_step.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace xtrain::optim::detail {

namespace {

bool is_lowp(c10::ScalarType t) { return t == c10::ScalarType::BFloat16 || t == c10::ScalarType::Half; }

void check_buffers(const StepInputs& in, int64_t state_numel, const std::string& who, bool allow_cuda) {
  TORCH_CHECK(state_numel >= 0, who, ": step() before init_state()");
  TORCH_CHECK(in.params.defined() && in.params.scalar_type() == c10::ScalarType::Float && in.params.is_contiguous(),
              who, ": params must be a contiguous fp32 tensor");
  TORCH_CHECK(in.params.numel() == state_numel, who, ": params has ", in.params.numel(),
              " elements but the state was initialised for ", state_numel);
  TORCH_CHECK(in.grads.defined() && in.grads.is_contiguous(), who, ": grads must be a contiguous tensor");
  TORCH_CHECK(in.grads.scalar_type() == c10::ScalarType::Float || is_lowp(in.grads.scalar_type()), who,
              ": grads must be fp32, bf16 or fp16, got ", in.grads.scalar_type());
  TORCH_CHECK(in.grads.numel() == state_numel, who, ": grads has ", in.grads.numel(), " elements, params ",
              state_numel);
  if (in.params_lowp.defined()) {
    TORCH_CHECK(is_lowp(in.params_lowp.scalar_type()) && in.params_lowp.is_contiguous(), who,
                ": params_lowp must be a contiguous bf16 or fp16 tensor, got ", in.params_lowp.scalar_type());
    TORCH_CHECK(in.params_lowp.numel() == state_numel, who, ": params_lowp has ", in.params_lowp.numel(),
                " elements, params ", state_numel);
  }
  TORCH_CHECK(in.params.device().is_cpu() || (allow_cuda && in.params.is_cuda()), who,
              ": params must be on the CPU", allow_cuda ? " or a GPU" : "", ", got ", in.params.device());
  for (const at::Tensor* t : {&in.grads, &in.params_lowp}) {
    TORCH_CHECK(!t->defined() || t->device() == in.params.device(), who, ": grads and params_lowp must be on ",
                in.params.device(), " with params, got ", t->device());
  }
}

}  // namespace

const std::vector<Segment>& checked_segments(const StepInputs& in, int64_t state_numel, const std::string& who,
                                             std::vector<Segment>& whole, bool allow_cuda) {
  check_buffers(in, state_numel, who, allow_cuda);
  const size_t num_groups = std::max<size_t>(in.groups.size(), 1);
  if (in.segments == nullptr) {
    whole.assign(1, Segment{0, state_numel, 0, 0});
    return whole;
  }
  int64_t end = 0;
  for (size_t i = 0; i < in.segments->size(); ++i) {
    const Segment& s = (*in.segments)[i];
    TORCH_CHECK(s.offset >= end && s.numel >= 0 && s.offset + s.numel <= state_numel, who, ": segment ", i,
                " [", s.offset, ", ", s.offset + s.numel, ") overlaps the previous one or leaves the buffer of ",
                state_numel, " elements (segments must be sorted and disjoint)");
    TORCH_CHECK(s.group >= 0 && static_cast<size_t>(s.group) < num_groups, who, ": segment ", i, " names group ",
                s.group, " but there are ", num_groups);
    end = s.offset + s.numel;
  }
  return *in.segments;
}

std::vector<GroupHyper> groups_or(const StepInputs& in, double lr, double weight_decay) {
  if (!in.groups.empty()) return in.groups;
  return {GroupHyper{lr, weight_decay}};
}

std::pair<double, double> step_betas(const StepInputs& in, const std::vector<double>& betas) {
  return {in.beta1_override >= 0 ? in.beta1_override : betas.at(0),
          in.beta2_override >= 0 ? in.beta2_override : betas.at(1)};
}

cpu::FlatBuffers flat_buffers(const StepInputs& in, const at::Tensor& state0, const at::Tensor& state1) {
  cpu::FlatBuffers b;
  b.params = in.params.data_ptr<float>();
  b.grads = in.grads.data_ptr();
  b.grad_type = in.grads.scalar_type();
  b.state0 = state0.defined() ? state0.data_ptr<float>() : nullptr;
  b.state1 = state1.defined() ? state1.data_ptr<float>() : nullptr;
  if (in.params_lowp.defined()) {
    b.lowp = in.params_lowp.data_ptr();
    b.lowp_type = in.params_lowp.scalar_type();
  }
  return b;
}

void parallel_over_segments(const std::vector<Segment>& segments,
                            const std::function<void(size_t, int64_t, int64_t)>& fn) {
  if (segments.empty()) return;
  const int64_t lo = segments.front().offset;
  const int64_t hi = segments.back().offset + segments.back().numel;
  at::parallel_for(lo, hi, kGrain, [&](int64_t begin, int64_t end) {
    // The first segment that ends after `begin`.
    auto it = std::upper_bound(segments.begin(), segments.end(), begin,
                               [](int64_t x, const Segment& s) { return x < s.offset + s.numel; });
    for (; it != segments.end() && it->offset < end; ++it) {
      const int64_t b = std::max(begin, it->offset), e = std::min(end, it->offset + it->numel);
      if (b < e) fn(static_cast<size_t>(it - segments.begin()), b, e);
    }
  });
}

}  // namespace xtrain::optim::detail
