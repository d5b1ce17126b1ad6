// L-BFGS as torch.optim.LBFGS (torch 1.13 lbfgs.py), over the flat buffers: one step runs up to
// max_iter iterations, re-evaluating the loss through StepInputs::closure, with a fixed step lr or
// the strong-Wolfe line search (lbfgs_line_search.h). The vectors are the parameters' elements in
// parameter order (torch's _gather_flat_grad) and every reduction is the same ATen op, so the
// trajectory is torch's. One parameter group (as torch), no weight decay, fp32 only.
// Not checkpointed: the curvature history (d, t, the (s, y) pairs) lives in memory; a resumed run
// starts a fresh history, as a new torch.optim.LBFGS would.
#pragma once
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/optim/lbfgs/options.h"
#include "xtrain/optim/lbfgs_scalar.h"
#include "xtrain/optim/optimizer.h"

namespace xtrain::optim {

class Lbfgs final : public Optimizer {
 public:
  explicit Lbfgs(const LbfgsParams& params);
  std::string name() const override { return "LBFGS"; }
  void init_state(int64_t numel) override { numel_ = numel; }
  // in.closure is required; in.loss is the loss at in.params, whose gradient in.grads holds.
  void step(const StepInputs& in) override;
  std::vector<std::pair<std::string, at::Tensor>> state() override { return {}; }
  int64_t func_evals() const { return func_evals_; }  // loss evaluations over all steps
  int64_t iterations() const { return n_iter_; }

 private:
  struct Iteration;
  void update_direction(const at::Tensor& flat_grad);
  // One iteration's move along d_ (line search or fixed step); false when it is the last.
  bool iterate(Iteration& it);

  LbfgsParams params_;
  int64_t numel_ = -1;
  // torch's state: counters over all steps, the last direction and step, the curvature pairs.
  int64_t func_evals_ = 0, n_iter_ = 0;
  at::Tensor d_, prev_flat_grad_;
  lbfgs::Num t_, h_diag_ = lbfgs::Num::py(1);
  std::deque<at::Tensor> old_dirs_, old_stps_;
  std::deque<float> ro_;
  double prev_loss_ = 0.0;
};

}  // namespace xtrain::optim
