// LAMB step in two passes (as DeepSpeed's kernel): pass 1 updates the moments and sums ||p||^2 and
// ||u||^2 per fixed block; the blocks are combined per segment in order, then per param_id (locally
// or by the caller's reduce_partial_norms); pass 2 recomputes u and applies the clamped trust ratio.
#include "xtrain/optim/lamb.h"

#include <ATen/Parallel.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "xtrain/base/error.h"
#include "xtrain/optim/flat_step.h"
#include "xtrain/optim/registry.h"

namespace xtrain::optim {

namespace {

// Elements per norm block: the partial sums never depend on how threads split the work.
constexpr int64_t kBlock = 16384;

struct Block {
  size_t segment;
  int64_t begin, end;
};

std::vector<Block> fixed_blocks(const std::vector<Segment>& segments) {
  std::vector<Block> blocks;
  for (size_t s = 0; s < segments.size(); ++s) {
    const int64_t end = segments[s].offset + segments[s].numel;
    for (int64_t b = segments[s].offset; b < end; b += kBlock) blocks.push_back({s, b, std::min(b + kBlock, end)});
  }
  return blocks;
}

// Pass 1: updates m and v; returns [S, 2] doubles (sum p^2, sum u^2) of each segment's own elements.
at::Tensor moments_and_norms(const std::vector<Segment>& segments, const std::vector<cpu::LambCoeffs>& coeffs,
                             const cpu::FlatBuffers& buffers) {
  const auto blocks = fixed_blocks(segments);
  std::vector<std::pair<double, double>> partial(blocks.size());
  at::parallel_for(0, static_cast<int64_t>(blocks.size()), std::max<int64_t>(1, detail::kGrain / kBlock),
                   [&](int64_t b0, int64_t b1) {
                     for (int64_t k = b0; k < b1; ++k) {
                       const Block& blk = blocks[k];
                       partial[k] = cpu::lamb_moments(coeffs[segments[blk.segment].group], buffers, blk.begin, blk.end);
                     }
                   });
  auto norms = at::zeros({static_cast<int64_t>(segments.size()), 2}, at::kDouble);
  double* n = norms.data_ptr<double>();
  for (size_t k = 0; k < blocks.size(); ++k) {
    n[2 * blocks[k].segment] += partial[k].first;
    n[2 * blocks[k].segment + 1] += partial[k].second;
  }
  return norms;
}

// Without a cross-rank reducer: segments sharing a param_id get the sum over those segments.
void combine_by_param(const std::vector<Segment>& segments, at::Tensor& norms) {
  std::map<int64_t, std::pair<double, double>> total;
  double* n = norms.data_ptr<double>();
  for (size_t s = 0; s < segments.size(); ++s) {
    total[segments[s].param_id].first += n[2 * s];
    total[segments[s].param_id].second += n[2 * s + 1];
  }
  for (size_t s = 0; s < segments.size(); ++s) {
    n[2 * s] = total[segments[s].param_id].first;
    n[2 * s + 1] = total[segments[s].param_id].second;
  }
}

}  // namespace

Lamb::Lamb(const LambParams& params) : params_(params) {}

void Lamb::init_state(int64_t numel) {
  exp_avg_ = at::zeros({numel}, at::kFloat);
  exp_avg_sq_ = at::zeros({numel}, at::kFloat);
}

void Lamb::step(const StepInputs& in) {
  std::vector<Segment> whole;
  const auto& segments = detail::checked_segments(in, exp_avg_.defined() ? exp_avg_.numel() : -1, name(), whole);
  const auto groups = detail::groups_or(in, params_.lr, params_.weight_decay);
  const auto [beta1, beta2] = detail::step_betas(in, params_.betas);
  const double t = static_cast<double>(step_count_ + 1);
  const double bias = params_.bias_correction ? std::sqrt(1.0 - std::pow(beta2, t)) / (1.0 - std::pow(beta1, t)) : 1.0;

  std::vector<cpu::LambCoeffs> coeffs;
  for (const auto& g : groups) {
    coeffs.push_back(cpu::LambCoeffs{static_cast<float>(in.grad_scale), static_cast<float>(beta1),
                                     static_cast<float>(1.0 - beta1), static_cast<float>(beta2),
                                     static_cast<float>(1.0 - beta2), static_cast<float>(params_.eps),
                                     static_cast<float>(g.weight_decay), params_.eps_inside_sqrt});
  }
  const auto buffers = detail::flat_buffers(in, exp_avg_, exp_avg_sq_);
  auto norms = moments_and_norms(segments, coeffs, buffers);
  if (in.reduce_partial_norms) {
    in.reduce_partial_norms(norms);
    TORCH_CHECK(norms.scalar_type() == at::kDouble && norms.dim() == 2 &&
                    norms.size(0) == static_cast<int64_t>(segments.size()) && norms.size(1) == 2,
                "Lamb: reduce_partial_norms must keep the [", segments.size(), ", 2] double tensor, got ",
                norms.sizes(), " ", norms.scalar_type());
  } else {
    combine_by_param(segments, norms);
  }
  const auto n = norms.contiguous();
  const double* sq = n.data_ptr<double>();
  trust_ratios_.assign(segments.size(), 1.0);
  std::vector<float> neg_scaled_lr(segments.size());
  for (size_t s = 0; s < segments.size(); ++s) {
    const double w = std::sqrt(sq[2 * s]), u = std::sqrt(sq[2 * s + 1]);
    if (w != 0 && u != 0) trust_ratios_[s] = std::clamp(w / u, params_.min_coeff, params_.max_coeff);
    neg_scaled_lr[s] = static_cast<float>(-(groups[segments[s].group].lr * bias * trust_ratios_[s]));
  }
  detail::parallel_over_segments(segments, [&](size_t s, int64_t begin, int64_t end) {
    cpu::lamb_apply(coeffs[segments[s].group], neg_scaled_lr[s], buffers, begin, end);
  });
  ++step_count_;
}

std::vector<std::pair<std::string, at::Tensor>> Lamb::state() {
  return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}};
}

namespace {

std::unique_ptr<Optimizer> make_lamb(const OptimizerOptions& o) {
  const auto& l = o.lamb;
  check_betas(l.betas);
  check_eps(l.eps);
  XTRAIN_USAGE_CHECK(l.min_coeff > 0 && l.min_coeff <= l.max_coeff, "optim: need 0 < min_coeff <= max_coeff, got ",
                     l.min_coeff, " and ", l.max_coeff, " (optimizer.params.min_coeff, max_coeff)");
  return std::make_unique<Lamb>(l);
}

}  // namespace

OptimizerEntry lamb_entry() {
  OptimizerEntry e;
  e.config = config::optimizer_types().find("Lamb", "optimizer.type");
  e.state_names = {"exp_avg", "exp_avg_sq"};
  // The trust ratio needs each parameter's whole norm: a ZeRO shard or an NVMe chunk holds parts.
  e.zero = ZeroSupport::unsupported;
  e.zero_reason = "LAMB's per-parameter trust ratio needs norms summed across the ranks that hold a parameter";
  e.nvme_offload = false;
  e.make = make_lamb;
  return e;
}

}  // namespace xtrain::optim
