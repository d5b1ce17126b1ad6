// `optimizer: {"type": "LBFGS", "params": {...}}` — torch.optim.LBFGS's arguments and defaults
// (torch 1.13). DeepSpeed has no LBFGS; the keys are torch's. Plain struct: the config half lives
// in config/optimizer_types.cpp, the optimizer in optim/lbfgs.h.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace xtrain::optim {

struct LbfgsParams {
  double lr = 1.0;
  int64_t max_iter = 20;
  std::optional<int64_t> max_eval;  // null: max_iter * 5 / 4 (integer division, as torch)
  double tolerance_grad = 1e-7;
  double tolerance_change = 1e-9;
  int64_t history_size = 100;
  std::string line_search_fn;  // "" (null) or "strong_wolfe"
  template <class V>
  void visit(V& v) {
    v("lr", lr, "learning rate: the step length without line search, the first trial step with it");
    v("max_iter", max_iter, "iterations per optimizer step");
    v.optional("max_eval", max_eval, "loss evaluations per optimizer step (null: max_iter * 5 / 4)");
    v("tolerance_grad", tolerance_grad, "stop when the largest |gradient| is at most this");
    v("tolerance_change", tolerance_change, "stop when the loss or the step changes by less than this");
    v("history_size", history_size, "curvature pairs kept");
    v("line_search_fn", line_search_fn, "null (fixed step lr) or \"strong_wolfe\"");
  }
  int64_t resolved_max_eval() const { return max_eval ? *max_eval : max_iter * 5 / 4; }
};

}  // namespace xtrain::optim
