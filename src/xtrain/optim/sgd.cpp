// SGD step: per-group coefficients, then one fused pass per segment range (cpu/kernels.h).
// "First step" (buffer = g) is step_count() == 0, so a restored checkpoint continues correctly.
#include "xtrain/optim/sgd.h"

#include <ATen/ops/zeros.h>

#include "xtrain/base/error.h"
#include "xtrain/optim/flat_step.h"
#include "xtrain/optim/registry.h"

namespace xtrain::optim {

Sgd::Sgd(const SgdParams& params) : params_(params) {}

void Sgd::init_state(int64_t numel) {
  numel_ = numel;
  if (params_.momentum != 0) momentum_buffer_ = at::zeros({numel}, at::kFloat);
}

void Sgd::step(const StepInputs& in) {
  std::vector<Segment> whole;
  const auto& segments = detail::checked_segments(in, numel_, name(), whole);
  const auto groups = detail::groups_or(in, params_.lr, params_.weight_decay);
  std::vector<cpu::SgdCoeffs> coeffs;
  for (const auto& g : groups) {
    cpu::SgdCoeffs c;
    c.grad_scale = static_cast<float>(in.grad_scale);
    c.weight_decay = static_cast<float>(g.weight_decay);
    c.momentum = static_cast<float>(params_.momentum);
    c.one_minus_dampening = static_cast<float>(1.0 - params_.dampening);
    c.neg_lr = static_cast<float>(-g.lr);
    c.use_momentum = params_.momentum != 0;
    c.first_step = step_count_ == 0;
    c.nesterov = params_.nesterov;
    coeffs.push_back(c);
  }
  const auto buffers = detail::flat_buffers(in, momentum_buffer_, at::Tensor());
  detail::parallel_over_segments(segments, [&](size_t s, int64_t begin, int64_t end) {
    cpu::sgd_update(coeffs[segments[s].group], buffers, begin, end);
  });
  ++step_count_;
}

std::vector<std::pair<std::string, at::Tensor>> Sgd::state() {
  if (!momentum_buffer_.defined()) return {};
  return {{"momentum_buffer", momentum_buffer_}};
}

namespace {

std::unique_ptr<Optimizer> make_sgd(const OptimizerOptions& o) {
  const auto& s = o.sgd;
  XTRAIN_USAGE_CHECK(s.momentum >= 0, "optim: momentum must be >= 0, got ", s.momentum, " (optimizer.params.momentum)");
  XTRAIN_USAGE_CHECK(!s.nesterov || (s.momentum > 0 && s.dampening == 0),
                     "optim: nesterov needs momentum > 0 and dampening = 0, got momentum ", s.momentum,
                     " and dampening ", s.dampening, " (optimizer.params.nesterov)");
  return std::make_unique<Sgd>(s);
}

}  // namespace

OptimizerEntry sgd_entry() {
  OptimizerEntry e;
  e.config = config::optimizer_types().find("SGD", "optimizer.type");
  e.state_names = {"momentum_buffer"};  // only kept when momentum != 0, as torch
  e.zero = ZeroSupport::untested;
  e.make = make_sgd;
  return e;
}

}  // namespace xtrain::optim
