// The strong-Wolfe line search of torch.optim.LBFGS (torch 1.13 lbfgs.py _strong_wolfe and
// _cubic_interpolate, themselves ports of minFunc's lswolfe/polyinterp): bracket a step satisfying
// the sufficient-decrease and curvature conditions, then zoom with cubic interpolation. Scalars
// follow torch's float/tensor mix (lbfgs_scalar.h) so the trial steps are torch's.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <utility>

#include "xtrain/optim/lbfgs_scalar.h"

namespace xtrain::optim::lbfgs {

// The loss and flat gradient at x + t * d (x restored afterwards).
using Directional = std::function<std::pair<double, at::Tensor>(Num t)>;

struct LineSearchResult {
  double loss = 0.0;
  at::Tensor grad;
  Num t;
  int64_t evals = 0;
};

// Minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to `bounds` (default: the
// interval between x1 and x2); the interval's midpoint when the cubic has no minimum.
Num cubic_interpolate(Num x1, Num f1, Num g1, Num x2, Num f2, Num g2, std::optional<std::pair<Num, Num>> bounds = {});

// From the loss f, gradient g and slope gtd = g.d at t = 0, trying `t` first.
LineSearchResult strong_wolfe(const Directional& evaluate, Num t, const at::Tensor& d, double f, const at::Tensor& g,
                              Num gtd, double tolerance_change, double c1 = 1e-4, double c2 = 0.9, int64_t max_ls = 25);

}  // namespace xtrain::optim::lbfgs
