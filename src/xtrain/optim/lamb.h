// LAMB with DeepSpeed FusedLamb's semantics (csrc/lamb/fused_lamb_cuda_kernel.cu) over flat
// buffers. Design choice: the trust ratio's norms are per param_id, summed over fixed 16K-element
// blocks combined in block order, so they never depend on the thread count, and a parameter split
// over segments or ranks (ZeRO) gets the norm of the whole parameter.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "xtrain/optim/optimizer.h"

namespace xtrain::optim {

// Adam moments; u = m/(sqrt(v)+eps) + wd*p on the *uncorrected* moments (m/sqrt(v+eps) with
// eps_inside_sqrt); ratio = ||p||/||u|| per parameter, clamped to [min_coeff, max_coeff], 1 when
// either norm is 0; p -= step_size*ratio*u, step_size = lr*sqrt(1-b2^t)/(1-b1^t) (lr without
// bias_correction). Under ZeRO, StepInputs::reduce_partial_norms receives [S, 2] doubles (per local
// segment: sum p^2, sum u^2) and must leave in every row the total over all segments of that row's
// param_id on all ranks (e.g. scatter-add the rows by param_id into [num_params, 2], all-reduce,
// gather the rows back). Without it, segments sharing a param_id are summed locally.
class Lamb final : public Optimizer {
 public:
  explicit Lamb(const LambParams& params);
  std::string name() const override { return "Lamb"; }
  void init_state(int64_t numel) override;
  void step(const StepInputs& in) override;
  std::vector<std::pair<std::string, at::Tensor>> state() override;
  // The trust ratio each segment used in the last step (DeepSpeed's get_lamb_coeffs), for metrics.
  const std::vector<double>& trust_ratios() const { return trust_ratios_; }

 private:
  LambParams params_;
  at::Tensor exp_avg_, exp_avg_sq_;
  std::vector<double> trust_ratios_;
};

}  // namespace xtrain::optim
