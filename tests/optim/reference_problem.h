// The optimizer tests' shared problem: tests/reference/fixtures/optim.pt (gen_optim.py) laid out in
// one flat buffer with gaps between the parameters, the optimizer configurations the generator ran,
// and run(): 120 steps with per-step lr, optional low-precision grads/copy, grad_scale, beta cycling.
// Header-only: included by optimizer_test.cpp and fused_kernel_test.cpp.
#pragma once
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/fixtures.h"
#include "xtrain/optim/optimizer.h"

namespace xtrain::optim::test {

using xtrain::testing::expect_close;
using xtrain::testing::expect_equal;

constexpr int64_t kPad = 5;        // elements between segments: must stay untouched
constexpr float kGapValue = 7.0f;  // what the gaps hold

inline const std::map<std::string, at::Tensor>& fixture() {
  static const auto f = xtrain::testing::load_tensors("optim.pt");
  return f;
}

// The fixture's parameters laid out in one flat buffer with kPad-element gaps.
struct Layout {
  std::vector<Segment> segments;
  int64_t numel = 0;
};

inline const Layout& layout() {
  static const Layout l = [] {
    Layout out;
    const auto sizes = fixture().at("sizes"), groups = fixture().at("groups");
    for (int64_t i = 0; i < sizes.numel(); ++i) {
      out.segments.push_back({out.numel, sizes[i].item<int64_t>(), static_cast<int>(groups[i].item<int64_t>()), i});
      out.numel += sizes[i].item<int64_t>() + kPad;
    }
    return out;
  }();
  return l;
}

inline at::Tensor spread(const at::Tensor& packed, float fill) {
  auto flat = at::full({layout().numel}, fill, at::kFloat);
  int64_t o = 0;
  for (const auto& s : layout().segments) {
    flat.narrow(0, s.offset, s.numel).copy_(packed.narrow(0, o, s.numel));
    o += s.numel;
  }
  return flat;
}

inline at::Tensor gather(const at::Tensor& flat) {
  std::vector<at::Tensor> parts;
  for (const auto& s : layout().segments) parts.push_back(flat.narrow(0, s.offset, s.numel));
  return at::cat(parts);
}

inline void expect_gaps_untouched(const at::Tensor& flat) {
  for (const auto& s : layout().segments) {
    EXPECT_TRUE(flat.narrow(0, s.offset + s.numel, kPad).eq(kGapValue).all().item<bool>()) << "gap after " << s.offset;
  }
}

inline double lr_at(int group, int64_t step) {  // as gen_optim.py
  const double base = fixture().at("lr")[group].item<double>();
  return base * (1.0 - 0.004 * static_cast<double>(step));
}

struct Settings {
  at::ScalarType grad_dtype = at::kFloat;
  double grad_multiplier = 1.0;  // grads *= m, grad_scale = 1/m
  std::optional<at::ScalarType> lowp;
  bool cycle_betas = false;
};

struct Trajectory {
  std::unique_ptr<Optimizer> opt;
  std::map<int64_t, at::Tensor> snapshots;  // step -> packed params
  at::Tensor final_flat;
};

inline Trajectory run(const OptimizerOptions& options, double wd0, const Settings& st = {}) {
  Trajectory out;
  out.opt = make_optimizer(options);
  auto params = spread(fixture().at("p0"), kGapValue);
  out.opt->init_state(params.numel());
  at::Tensor lowp = st.lowp ? at::empty({params.numel()}, *st.lowp) : at::Tensor();
  const auto& grads = fixture().at("grads");
  for (int64_t t = 1; t <= grads.size(0); ++t) {
    StepInputs in;
    in.params = params;
    in.grads = (spread(grads[t - 1].to(at::kFloat), NAN) * st.grad_multiplier).to(st.grad_dtype);
    in.grad_scale = 1.0 / st.grad_multiplier;
    in.params_lowp = lowp;
    in.segments = &layout().segments;
    in.groups = {{lr_at(0, t), wd0}, {lr_at(1, t), 0.0}};
    if (st.cycle_betas) {
      in.beta1_override = 0.85 + 0.1 * static_cast<double>(t % 7) / 7;
      in.beta2_override = 0.99;
    }
    out.opt->step(in);
    if (lowp.defined()) expect_equal(gather(lowp), gather(params).to(*st.lowp), "lowp copy at step " + std::to_string(t));
    out.snapshots[t] = gather(params).clone();
  }
  expect_gaps_untouched(params);
  out.final_flat = params;
  return out;
}

struct Case {
  std::string name;
  OptimizerOptions options;
  double wd0;
  bool cycle_betas = false;
};

inline std::vector<Case> cases() {
  OptimizerOptions adamw;  // AdamW, betas (0.9, 0.999), eps 1e-8
  OptimizerOptions adam_l2 = adamw;
  adam_l2.type = "Adam";
  adam_l2.adam.adam_w_mode = false;
  OptimizerOptions nobc = adamw;
  nobc.adam.bias_correction = false;
  OptimizerOptions sgd;
  sgd.type = "SGD";
  OptimizerOptions sgd_momentum = sgd;
  sgd_momentum.sgd.momentum = 0.9;
  sgd_momentum.sgd.dampening = 0.1;
  OptimizerOptions sgd_nesterov = sgd;
  sgd_nesterov.sgd.momentum = 0.9;
  sgd_nesterov.sgd.nesterov = true;
  OptimizerOptions lamb;
  lamb.type = "Lamb";
  OptimizerOptions lamb_clamped = lamb;
  lamb_clamped.lamb.bias_correction = false;
  lamb_clamped.lamb.eps_inside_sqrt = true;
  lamb_clamped.lamb.max_coeff = 0.5;
  lamb_clamped.lamb.min_coeff = 0.2;
  return {{"adamw", adamw, 0.1},        {"adam_l2", adam_l2, 0.05},   {"adamw_betas", adamw, 0.1, true},
          {"adamw_nobc", nobc, 0.1},    {"sgd", sgd, 0.01},           {"sgd_momentum", sgd_momentum, 0.01},
          {"sgd_nesterov", sgd_nesterov, 0.01}, {"lamb", lamb, 0.1}, {"lamb_clamped", lamb_clamped, 0.1}};
}


inline Case case_named(const std::string& name) {
  for (auto& c : cases()) {
    if (c.name == name) return c;
  }
  throw std::runtime_error("no case " + name);
}


}  // namespace xtrain::optim::test
