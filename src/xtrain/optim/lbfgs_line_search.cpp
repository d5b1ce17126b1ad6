// torch.optim.LBFGS's strong-Wolfe line search, statement for statement (torch 1.13 lbfgs.py):
// the bracketing phase grows the step by cubic extrapolation until the sufficient-decrease test
// fails, the slope turns non-negative or both Wolfe conditions hold; the zoom phase shrinks the
// bracket, moving a trial that lands too near an end 10% of the bracket inside.
#include "xtrain/optim/lbfgs_line_search.h"

#include <array>
#include <tuple>

namespace xtrain::optim::lbfgs {

Num cubic_interpolate(Num x1, Num f1, Num g1, Num x2, Num f2, Num g2, std::optional<std::pair<Num, Num>> bounds) {
  Num lo = x1, hi = x2;
  if (bounds) {
    std::tie(lo, hi) = *bounds;
  } else if (!(x1 <= x2)) {
    lo = x2;
    hi = x1;
  }
  const Num d1 = g1 + g2 - Num::py(3) * (f1 - f2) / (x1 - x2);
  const Num d2_square = d1 * d1 - g1 * g2;  // d1**2: ATen's pow(x, 2) is x * x
  if (!(d2_square >= Num::py(0))) return (lo + hi) / Num::py(2.0);
  const Num d2 = sqrt(d2_square);
  const Num min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + Num::py(2) * d2))
                               : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + Num::py(2) * d2));
  return py_min(py_max(min_pos, lo), hi);
}

namespace {

// One or two trial points: step, loss, gradient, slope.
struct Bracket {
  std::array<Num, 2> t;
  std::array<double, 2> f{};
  std::array<at::Tensor, 2> g;
  std::array<Num, 2> gtd;
  int size = 0;
  void set(int i, Num ti, double fi, at::Tensor gi, Num gtdi) {
    t[i] = ti;
    f[i] = fi;
    g[i] = std::move(gi);
    gtd[i] = gtdi;
  }
  void copy(int to, int from) { set(to, t[from], f[from], g[from], gtd[from]); }
  int low() const { return f[0] <= f[size - 1] ? 0 : 1; }
};

struct Search {
  const Directional& evaluate;
  const at::Tensor& d;
  double f;  // at t = 0
  Num gtd;   // at t = 0
  double c1, c2, tolerance_change;
  int64_t max_ls;
  double f_new = 0.0;
  at::Tensor g_new;
  Num gtd_new;
  int64_t evals = 0, ls_iter = 0;

  void probe(Num t) {
    std::tie(f_new, g_new) = evaluate(t);
    ++evals;
    gtd_new = Num::item(g_new.dot(d));
  }
  bool armijo_fails(Num t) const { return Num::py(f_new) > Num::py(f) + Num::py(c1) * t * gtd; }
  bool curvature_holds() const { return abs(gtd_new) <= Num::py(-c2) * gtd; }

  // Returns whether a point satisfying both conditions was found (then it is the only one).
  bool bracket_phase(Num t, const at::Tensor& g, Bracket& b) {
    probe(t);
    Num t_prev = Num::py(0), gtd_prev = gtd;
    double f_prev = f;
    at::Tensor g_prev = g;
    while (ls_iter < max_ls) {
      if (armijo_fails(t) || (ls_iter > 1 && f_new >= f_prev) || (!curvature_holds() && gtd_new >= Num::py(0))) {
        b.size = 2;
        b.set(0, t_prev, f_prev, g_prev, gtd_prev);
        b.set(1, t, f_new, g_new.clone(), gtd_new);
        return false;
      }
      if (curvature_holds()) {
        b.size = 1;
        b.set(0, t, f_new, g_new, gtd_new);
        return true;
      }
      const Num min_step = t + Num::py(0.01) * (t - t_prev), max_step = t * Num::py(10);
      const Num tmp = t;
      t = cubic_interpolate(t_prev, Num::py(f_prev), gtd_prev, t, Num::py(f_new), gtd_new,
                            std::make_pair(min_step, max_step));
      t_prev = tmp;
      f_prev = f_new;
      g_prev = g_new.clone();
      gtd_prev = gtd_new;
      probe(t);
      ++ls_iter;
    }
    b.size = 2;  // max_ls reached: [0, t] (the slopes are not used: the zoom loop does not run)
    b.set(0, Num::py(0), f, g, gtd_prev);
    b.set(1, t, f_new, g_new, gtd_new);
    return false;
  }

  // Returns the index of the bracket's low point (the result).
  int zoom_phase(Bracket& b, const Num d_norm) {
    bool insuf_progress = false;
    int low = b.low(), high = 1 - low;
    while (ls_iter < max_ls) {
      if (abs(b.t[1] - b.t[0]) * d_norm < Num::py(tolerance_change)) break;
      Num t = cubic_interpolate(b.t[0], Num::py(b.f[0]), b.gtd[0], b.t[1], Num::py(b.f[1]), b.gtd[1]);
      const Num hi = py_max(b.t[0], b.t[1]), lo = py_min(b.t[0], b.t[1]);
      const Num eps = Num::py(0.1) * (hi - lo);
      if (py_min(hi - t, t - lo) < eps) {  // too near an end of the bracket
        if (insuf_progress || t >= hi || t <= lo) {
          t = abs(t - hi) < abs(t - lo) ? hi - eps : lo + eps;
          insuf_progress = false;
        } else {
          insuf_progress = true;
        }
      } else {
        insuf_progress = false;
      }
      probe(t);
      ++ls_iter;
      if (armijo_fails(t) || f_new >= b.f[low]) {
        b.set(high, t, f_new, g_new.clone(), gtd_new);
        low = b.low();
        high = 1 - low;
        continue;
      }
      const bool done = curvature_holds();
      if (!done && gtd_new * (b.t[high] - b.t[low]) >= Num::py(0)) b.copy(high, low);
      b.set(low, t, f_new, g_new.clone(), gtd_new);
      if (done) break;
    }
    return low;
  }
};

}  // namespace

LineSearchResult strong_wolfe(const Directional& evaluate, Num t, const at::Tensor& d, double f, const at::Tensor& g,
                              Num gtd, double tolerance_change, double c1, double c2, int64_t max_ls) {
  const Num d_norm = Num::item(d.abs().max());
  Search s{evaluate, d, f, gtd, c1, c2, tolerance_change, max_ls};
  Bracket b;
  const bool done = s.bracket_phase(t, g.clone(), b);
  const int low = done ? 0 : s.zoom_phase(b, d_norm);
  return {b.f[low], b.g[low], b.t[low], s.evals};
}

}  // namespace xtrain::optim::lbfgs
