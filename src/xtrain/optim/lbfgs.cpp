// torch.optim.LBFGS.step (torch 1.13 lbfgs.py) over the flat buffers, iteration for iteration:
// the two-loop recursion for the direction, the first iteration's step min(1, 1/|g|_1) * lr, then
// a fixed step lr (the loss re-evaluated except after the last iteration) or the strong-Wolfe line
// search, and torch's stopping tests in torch's order. The registry entry says why ZeRO, NVMe
// offload and several parameter groups cannot run it.
#include "xtrain/optim/lbfgs.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>

#include <algorithm>
#include <cmath>

#include "xtrain/base/error.h"
#include "xtrain/optim/flat_step.h"
#include "xtrain/optim/lbfgs_line_search.h"
#include "xtrain/optim/registry.h"

namespace xtrain::optim {

using lbfgs::Num;

namespace {

// The parameters' elements in parameter order: torch's flat vector (_gather_flat_grad, _add_grad).
class FlatVector {
 public:
  explicit FlatVector(const std::vector<Segment>& segments) : segments_(segments) {
    std::stable_sort(segments_.begin(), segments_.end(),
                     [](const Segment& a, const Segment& b) { return a.param_id < b.param_id; });
  }
  at::Tensor gather(const at::Tensor& flat) const {
    std::vector<at::Tensor> parts;
    for (const auto& s : segments_) parts.push_back(flat.narrow(0, s.offset, s.numel));
    return at::cat(parts);
  }
  // flat += t * d, one parameter at a time (the same add_ as torch's, with alpha = t).
  void add(const at::Tensor& flat, Num t, const at::Tensor& d) const {
    int64_t o = 0;
    for (const auto& s : segments_) {
      flat.narrow(0, s.offset, s.numel).add_(d.narrow(0, o, s.numel), t.v);
      o += s.numel;
    }
  }
  void assign(const at::Tensor& flat, const at::Tensor& x) const {
    int64_t o = 0;
    for (const auto& s : segments_) {
      flat.narrow(0, s.offset, s.numel).copy_(x.narrow(0, o, s.numel));
      o += s.numel;
    }
  }

 private:
  std::vector<Segment> segments_;
};

// torch's `tensor.abs().max() <= tol`: a float32 comparison.
bool max_abs_at_most(const at::Tensor& t, double tol) {
  return t.abs().max().item<float>() <= static_cast<float>(tol);
}

}  // namespace

struct Lbfgs::Iteration {
  const StepInputs& in;
  FlatVector flat;
  double lr = 0.0;
  double loss = 0.0;  // at the current parameters
  at::Tensor flat_grad;
  int64_t current_evals = 1;
  int64_t n_iter = 0;
};

Lbfgs::Lbfgs(const LbfgsParams& params) : params_(params) {}

void Lbfgs::step(const StepInputs& in) {
  XTRAIN_USAGE_CHECK(in.closure, "optim: LBFGS re-evaluates the loss within a step; the caller must pass ",
                     "StepInputs::closure (the engine does when optimizer.type is LBFGS)");
  TORCH_INTERNAL_ASSERT(in.grad_scale == 1.0 && !in.params_lowp.defined(),
                        "LBFGS: fp32 only, without clipping or loss scaling (the engine refuses them)");
  std::vector<Segment> whole;
  const auto& segments = detail::checked_segments(in, numel_, name(), whole);
  const auto groups = detail::groups_or(in, params_.lr, 0.0);
  for (const auto& g : groups) {
    XTRAIN_USAGE_CHECK(g.lr == groups[0].lr && g.weight_decay == 0.0,
                       "optim: LBFGS takes one parameter group without weight decay (as torch.optim.LBFGS), got lr ",
                       g.lr, " and weight_decay ", g.weight_decay, " beside lr ", groups[0].lr,
                       " (remove xtrain.param_groups)");
  }
  at::NoGradGuard no_grad;
  FlatVector flat(segments);
  Iteration it{in, flat, groups[0].lr, in.loss, flat.gather(in.grads)};
  ++func_evals_;
  ++step_count_;
  if (max_abs_at_most(it.flat_grad, params_.tolerance_grad)) return;  // already optimal
  while (it.n_iter < params_.max_iter && iterate(it)) {
  }
}

// The direction -H g from the curvature pairs (torch's two-loop recursion with one buffer).
void Lbfgs::update_direction(const at::Tensor& flat_grad) {
  if (n_iter_ == 1) {
    d_ = flat_grad.neg();
    old_dirs_.clear();
    old_stps_.clear();
    ro_.clear();
    h_diag_ = Num::py(1);
    return;
  }
  const at::Tensor y = flat_grad.sub(prev_flat_grad_);
  const at::Tensor s = d_.mul(t_.v);
  const float ys = y.dot(s).item<float>();
  if (ys > static_cast<float>(1e-10)) {
    if (static_cast<int64_t>(old_dirs_.size()) == params_.history_size) {
      old_dirs_.pop_front();
      old_stps_.pop_front();
      ro_.pop_front();
    }
    old_dirs_.push_back(y);
    old_stps_.push_back(s);
    ro_.push_back(1.0f / ys);
    h_diag_ = Num::f(ys / y.dot(y).item<float>());
  }
  const size_t num_old = old_dirs_.size();
  std::vector<float> al(num_old);
  at::Tensor q = flat_grad.neg();
  for (size_t k = num_old; k-- > 0;) {
    al[k] = old_stps_[k].dot(q).item<float>() * ro_[k];
    q.add_(old_dirs_[k], -al[k]);
  }
  at::Tensor r = q.mul(h_diag_.v);
  for (size_t k = 0; k < num_old; ++k) {
    const float be = old_dirs_[k].dot(r).item<float>() * ro_[k];
    r.add_(old_stps_[k], al[k] - be);
  }
  d_ = r;
}

bool Lbfgs::iterate(Iteration& it) {
  ++it.n_iter;
  ++n_iter_;
  update_direction(it.flat_grad);
  prev_flat_grad_ = it.flat_grad.clone();
  prev_loss_ = it.loss;
  t_ = n_iter_ == 1 ? py_min(Num::py(1.0), Num::py(1.0) / Num::item(it.flat_grad.abs().sum())) * Num::py(it.lr)
                    : Num::py(it.lr);
  const Num gtd = Num::item(it.flat_grad.dot(d_));
  if (gtd > Num::py(-params_.tolerance_change)) return false;  // not a descent direction
  const auto& in = it.in;
  int64_t ls_evals = 0;
  bool opt_cond = false;
  if (params_.line_search_fn == "strong_wolfe") {
    const at::Tensor x_init = it.flat.gather(in.params);
    const lbfgs::Directional evaluate = [&](Num t) {
      it.flat.add(in.params, t, d_);
      at::AutoGradMode grad_on(true);
      const double f = in.closure();
      at::Tensor g = it.flat.gather(in.grads);
      it.flat.assign(in.params, x_init);
      return std::make_pair(f, g);
    };
    auto r = lbfgs::strong_wolfe(evaluate, t_, d_, it.loss, it.flat_grad, gtd, params_.tolerance_change);
    it.loss = r.loss;
    it.flat_grad = r.grad;
    t_ = r.t;
    ls_evals = r.evals;
    it.flat.add(in.params, t_, d_);
    opt_cond = max_abs_at_most(it.flat_grad, params_.tolerance_grad);
  } else {
    it.flat.add(in.params, t_, d_);
    if (it.n_iter != params_.max_iter) {  // torch skips the evaluation after the last iteration
      at::AutoGradMode grad_on(true);
      it.loss = in.closure();
      it.flat_grad = it.flat.gather(in.grads);
      opt_cond = max_abs_at_most(it.flat_grad, params_.tolerance_grad);
      ls_evals = 1;
    }
  }
  it.current_evals += ls_evals;
  func_evals_ += ls_evals;
  if (it.n_iter == params_.max_iter || it.current_evals >= params_.resolved_max_eval() || opt_cond) return false;
  if (max_abs_at_most(d_.mul(t_.v), params_.tolerance_change)) return false;  // no progress in x
  return !(std::abs(it.loss - prev_loss_) < params_.tolerance_change);         // nor in the loss
}

namespace {

std::unique_ptr<Optimizer> make_lbfgs(const OptimizerOptions& o) {
  const auto p = config::custom_params<LbfgsParams>(o);
  XTRAIN_USAGE_CHECK(p.max_iter >= 1, "optim: LBFGS max_iter must be >= 1, got ", p.max_iter,
                     " (optimizer.params.max_iter)");
  XTRAIN_USAGE_CHECK(p.resolved_max_eval() >= 1, "optim: LBFGS max_eval must be >= 1, got ", p.resolved_max_eval(),
                     " (optimizer.params.max_eval)");
  XTRAIN_USAGE_CHECK(p.history_size >= 1, "optim: LBFGS history_size must be >= 1, got ", p.history_size,
                     " (optimizer.params.history_size)");
  XTRAIN_USAGE_CHECK(p.line_search_fn.empty() || p.line_search_fn == "strong_wolfe",
                     "optim: LBFGS line_search_fn must be null or \"strong_wolfe\", got \"", p.line_search_fn,
                     "\" (optimizer.params.line_search_fn)");
  return std::make_unique<Lbfgs>(p);
}

}  // namespace

OptimizerEntry lbfgs_entry() {
  OptimizerEntry e;
  e.config = config::optimizer_types().find("LBFGS", "optimizer.type");
  e.zero = ZeroSupport::unsupported;
  e.zero_reason = "its directions and line search use the whole gradient and parameters on every rank";
  e.nvme_offload = false;
  e.needs_closure = true;
  e.make = make_lbfgs;
  return e;
}

}  // namespace xtrain::optim
