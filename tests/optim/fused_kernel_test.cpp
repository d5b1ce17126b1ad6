// The fused CPU kernel's promises (cpu/kernels.h): bf16/fp16 grads give the fp32 trajectory, the
// low-precision copy equals the rounded master bit for bit (edge values included, against ATen and
// c10's scalar conversions), grad_scale is a pre-multiply, and neither the thread count nor the
// ISA (scalar, AVX2, AVX-512) changes a bit (LAMB's lane-summed norms: within 1e-6).
#include <ATen/Functions.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstring>

#include "optim/reference_problem.h"
#include "xtrain/optim/cpu/kernels.h"
#include "xtrain/optim/optimizer.h"

namespace xtrain::optim::test::fused_kernel_test {
namespace {

TEST(Optim, Bf16AndFp16GradsGiveTheSameBits) {
  // The fixture's grads are exact in bf16 and fp16, so the trajectory must not change at all.
  for (const char* name : {"adamw", "sgd_momentum", "lamb"}) {
    const Case c = case_named(name);
    const auto ref = run(c.options, c.wd0).final_flat;
    for (auto dtype : {at::kBFloat16, at::kHalf}) {
      Settings st;
      st.grad_dtype = dtype;
      expect_equal(run(c.options, c.wd0, st).final_flat, ref, std::string(name) + " with " + c10::toString(dtype));
    }
  }
}

TEST(Optim, LowPrecisionCopyIsTheRoundedMaster) {
  // run() checks after every step that the copy equals params.to(dtype) bit for bit.
  for (const char* name : {"adamw", "sgd_nesterov", "lamb_clamped"}) {
    const Case c = case_named(name);
    for (auto dtype : {at::kBFloat16, at::kHalf}) {
      Settings st;
      st.lowp = dtype;
      st.grad_dtype = at::kBFloat16;
      run(c.options, c.wd0, st);
    }
  }
}

TEST(Optim, GradScaleIsAPreMultiply) {
  // grads * 1024 with grad_scale 1/1024 is exact in every dtype: the same bits as unscaled.
  for (const char* name : {"adam_l2", "sgd_momentum", "lamb"}) {
    const Case c = case_named(name);
    const auto ref = run(c.options, c.wd0).final_flat;
    Settings st;
    st.grad_multiplier = 1024.0;
    expect_equal(run(c.options, c.wd0, st).final_flat, ref, std::string(name) + " grad_scale");
    st.grad_dtype = at::kBFloat16;
    expect_equal(run(c.options, c.wd0, st).final_flat, ref, std::string(name) + " grad_scale, bf16 grads");
  }
}

// A larger random problem: three segments in two groups, sizes that leave vector tails.
struct Random {
  at::Tensor params, grads, lowp;
  std::vector<Segment> segments;
};

Random random_problem(int64_t numel, at::ScalarType grad_dtype, std::optional<at::ScalarType> lowp) {
  at::manual_seed(7);
  Random r;
  r.params = at::randn({numel}) * at::exp2(at::randint(-8, 8, {numel}).to(at::kFloat));
  r.grads = at::randn({numel}).to(grad_dtype);
  if (lowp) r.lowp = at::empty({numel}, *lowp);
  const int64_t a = numel / 3 + 1, b = numel / 2 + 3;
  r.segments = {{0, a, 0, 0}, {a + 2, b - a - 2, 1, 1}, {b, numel - b - 1, 0, 2}};
  return r;
}

std::vector<at::Tensor> steps_on(Random r, const OptimizerOptions& o, int steps) {
  auto opt = make_optimizer(o);
  opt->init_state(r.params.numel());
  for (int t = 0; t < steps; ++t) {
    StepInputs in;
    in.params = r.params;
    in.grads = r.grads;
    in.params_lowp = r.lowp;
    in.segments = &r.segments;
    in.groups = {{1e-2, 0.1}, {3e-3, 0.0}};
    opt->step(in);
  }
  std::vector<at::Tensor> out = {r.params};
  if (r.lowp.defined()) out.push_back(r.lowp);
  for (auto& [name, t] : opt->state()) out.push_back(t);
  return out;
}

Random clone(const Random& r) {
  return {r.params.clone(), r.grads.clone(), r.lowp.defined() ? r.lowp.clone() : at::Tensor(), r.segments};
}

TEST(Optim, ThreadCountDoesNotChangeBits) {
  const int threads = at::get_num_threads();
  const auto r = random_problem(300007, at::kFloat, at::kBFloat16);
  for (const char* name : {"adamw", "sgd_momentum", "lamb"}) {
    at::set_num_threads(1);
    const auto one = steps_on(clone(r), case_named(name).options, 3);
    at::set_num_threads(2);
    const auto two = steps_on(clone(r), case_named(name).options, 3);
    for (size_t i = 0; i < one.size(); ++i) expect_equal(two[i], one[i], std::string(name) + " tensor " + std::to_string(i));
  }
  at::set_num_threads(threads);
}

TEST(Optim, EveryIsaGivesTheSameBits) {
  using cpu::Isa;
  const Isa best = cpu::best_isa();
  for (const char* name : {"adamw", "adam_l2", "sgd_nesterov", "lamb_clamped"}) {
    for (auto g : {at::kFloat, at::kBFloat16, at::kHalf}) {
      for (auto l : {at::kBFloat16, at::kHalf}) {
        const auto r = random_problem(1037, g, l);
        cpu::force_isa(Isa::kScalar);
        const auto ref = steps_on(clone(r), case_named(name).options, 2);
        for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
          if (static_cast<int>(isa) > static_cast<int>(best)) continue;
          cpu::force_isa(isa);
          const auto got = steps_on(clone(r), case_named(name).options, 2);
          const std::string what = std::string(name) + " " + cpu::isa_name(isa) + " grads " + c10::toString(g);
          for (size_t i = 0; i < ref.size(); ++i) {
            // LAMB's norms are summed lane by lane, so the lane count changes their rounding.
            if (std::string(name).rfind("lamb", 0) == 0 && i != 1) {
              expect_close(got[i], ref[i], 1e-6, 1e-9, what);
            } else if (std::string(name).rfind("lamb", 0) != 0) {
              expect_equal(got[i], ref[i], what + " tensor " + std::to_string(i));
            }
          }
        }
      }
    }
  }
  cpu::force_isa(best);
}

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

TEST(Optim, LowPrecisionRoundingOnEdgeValues) {
  // Ties to even both ways, overflow to inf, subnormals, signed zeros, infinities, NaN; then random
  // values over a wide exponent range. AdamW with lr = 0 and zero grads leaves p unchanged.
  std::vector<float> edge = {from_bits(0x3F808000), from_bits(0x3F818000), from_bits(0x3F80FFFF), from_bits(0x7F7FFFFF),
                             from_bits(0x00000001), from_bits(0x80008000), 65520.f, 65519.f, from_bits(0x33000000),
                             from_bits(0x33000001), 0.f, -0.f, INFINITY, -INFINITY, 1e-40f, -5.9604645e-08f, NAN};
  const int64_t n = 1037;
  auto params = at::randn({n}) * at::exp2(at::randint(-30, 30, {n}).to(at::kFloat));
  for (size_t i = 0; i < edge.size(); ++i) params[static_cast<int64_t>(i)] = edge[i];
  for (int isa = 0; isa <= static_cast<int>(cpu::best_isa()); ++isa) {
    const auto previous = cpu::force_isa(static_cast<cpu::Isa>(isa));
    for (auto dtype : {at::kBFloat16, at::kHalf}) {
      auto p = params.clone();
      auto lowp = at::empty({n}, dtype);
      auto opt = make_optimizer(OptimizerOptions{});
      opt->init_state(n);
      StepInputs in;
      in.params = p;
      in.grads = at::zeros({n});
      in.params_lowp = lowp;
      in.groups = {{0.0, 0.0}};
      opt->step(in);
      const std::string what = std::string(cpu::isa_name(static_cast<cpu::Isa>(isa))) + " " + c10::toString(dtype);
      for (int64_t i = 0; i < n; ++i) {
        const float a = p.data_ptr<float>()[i], b = params.data_ptr<float>()[i];
        EXPECT_TRUE(bits(a) == bits(b) || (std::isnan(a) && std::isnan(b))) << what << " p changed at " << i << ": " << b << " -> " << a;
      }
      const int64_t nan_at = static_cast<int64_t>(edge.size()) - 1;
      expect_equal(lowp.narrow(0, 0, nan_at), p.narrow(0, 0, nan_at).to(dtype), what + " (vs ATen)");
      expect_equal(lowp.narrow(0, nan_at + 1, n - nan_at - 1), p.narrow(0, nan_at + 1, n - nan_at - 1).to(dtype), what);
      for (int64_t i = 0; i < n; ++i) {  // and against c10's scalar conversion, NaN included
        const float x = p.data_ptr<float>()[i];
        const uint16_t expect = dtype == at::kBFloat16 ? c10::BFloat16(x).x : c10::Half(x).x;
        const uint16_t got = dtype == at::kBFloat16 ? lowp.data_ptr<c10::BFloat16>()[i].x : lowp.data_ptr<c10::Half>()[i].x;
        if (!std::isnan(x) || dtype == at::kBFloat16) ASSERT_EQ(got, expect) << what << " at " << i << " bits " << bits(x);
      }
    }
    cpu::force_isa(previous);
  }
}


}  // namespace
}  // namespace xtrain::optim::test::fused_kernel_test
