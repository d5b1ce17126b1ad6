// The optimizer kernel bodies, written once against a vector type `V` (simd.h). Deliberately no
// include guard and no includes: kernels.cpp includes this file once per ISA, inside a namespace
// that defines `V` and under the matching `#pragma GCC target`. Whole vectors run with V, the tail
// with VecScalar: the same operations in the same order, so every element gets the same bits.
// Operation order follows torch.optim's CPU ops (add with alpha = fma, addcmul, addcdiv).

template <class W, class G, class L>
inline void adam_lanes(const AdamCoeffs& c, int64_t i, float* p, const G* g, float* m, float* v, L* lowp) {
  using R = typename W::R;
  R pv = W::load(p + i);
  R gv = W::mul(W::load(g + i), W::set1(c.grad_scale));
  if (c.l2 != 0) gv = W::fmadd(pv, W::set1(c.l2), gv);  // skipped at 0 as torch does: inf*0 would be NaN
  const R mv = W::fmadd(gv, W::set1(c.one_minus_beta1), W::mul(W::load(m + i), W::set1(c.beta1)));
  const R vv = W::fmadd(W::mul(W::set1(c.one_minus_beta2), gv), gv, W::mul(W::load(v + i), W::set1(c.beta2)));
  const R denom = W::add(W::div(W::sqrt(vv), W::set1(c.bc2_sqrt)), W::set1(c.eps));
  pv = W::mul(pv, W::set1(c.decay_mul));
  pv = W::add(pv, W::div(W::mul(W::set1(c.neg_step_size), mv), denom));
  W::store(m + i, mv);
  W::store(v + i, vv);
  W::store(p + i, pv);
  if (lowp != nullptr) W::store(lowp + i, pv);
}

template <class W, class G, class L>
inline void sgd_lanes(const SgdCoeffs& c, int64_t i, float* p, const G* g, float* buf, L* lowp) {
  using R = typename W::R;
  R pv = W::load(p + i);
  R d = W::mul(W::load(g + i), W::set1(c.grad_scale));
  if (c.weight_decay != 0) d = W::fmadd(pv, W::set1(c.weight_decay), d);
  if (c.use_momentum) {
    const R b = c.first_step
                    ? d
                    : W::fmadd(d, W::set1(c.one_minus_dampening), W::mul(W::load(buf + i), W::set1(c.momentum)));
    W::store(buf + i, b);
    d = c.nesterov ? W::fmadd(b, W::set1(c.momentum), d) : b;
  }
  pv = W::fmadd(d, W::set1(c.neg_lr), pv);
  W::store(p + i, pv);
  if (lowp != nullptr) W::store(lowp + i, pv);
}

// LAMB's per-element update direction (DeepSpeed FusedLamb): m/(sqrt(v)+eps) + wd*p.
template <class W>
inline typename W::R lamb_direction(const LambCoeffs& c, typename W::R p, typename W::R m, typename W::R v) {
  const auto denom = c.eps_inside_sqrt ? W::sqrt(W::add(v, W::set1(c.eps))) : W::add(W::sqrt(v), W::set1(c.eps));
  return W::fmadd(W::set1(c.weight_decay), p, W::div(m, denom));
}

template <class W, class G>
inline void lamb_moment_lanes(const LambCoeffs& c, int64_t i, const float* p, const G* g, float* m, float* v,
                              typename W::R& sum_w, typename W::R& sum_u) {
  using R = typename W::R;
  const R gv = W::mul(W::load(g + i), W::set1(c.grad_scale));
  const R mv = W::fmadd(gv, W::set1(c.one_minus_beta1), W::mul(W::load(m + i), W::set1(c.beta1)));
  const R vv = W::fmadd(W::mul(W::set1(c.one_minus_beta2), gv), gv, W::mul(W::load(v + i), W::set1(c.beta2)));
  W::store(m + i, mv);
  W::store(v + i, vv);
  const R pv = W::load(p + i);
  const R u = lamb_direction<W>(c, pv, mv, vv);
  sum_w = W::fmadd(pv, pv, sum_w);
  sum_u = W::fmadd(u, u, sum_u);
}

template <class W, class L>
inline void lamb_apply_lanes(const LambCoeffs& c, float neg_scaled_lr, int64_t i, float* p, const float* m,
                             const float* v, L* lowp) {
  auto pv = W::load(p + i);
  const auto u = lamb_direction<W>(c, pv, W::load(m + i), W::load(v + i));
  pv = W::fmadd(u, W::set1(neg_scaled_lr), pv);
  W::store(p + i, pv);
  if (lowp != nullptr) W::store(lowp + i, pv);
}

void adam(const AdamCoeffs& coeffs, const FlatBuffers& b, int64_t begin, int64_t end) {
  const AdamCoeffs c = coeffs;  // a local copy: stores through float* cannot alias it, broadcasts stay hoisted
  with_typed_buffers(b, begin, [&](const auto* g, auto* lowp) {
    float* p = b.params + begin;
    float* m = b.state0 + begin;
    float* v = b.state1 + begin;
    const int64_t n = end - begin;
    int64_t i = 0;
    for (; i + V::kWidth <= n; i += V::kWidth) adam_lanes<V>(c, i, p, g, m, v, lowp);
    for (; i < n; ++i) adam_lanes<VecScalar>(c, i, p, g, m, v, lowp);
  });
}

void sgd(const SgdCoeffs& coeffs, const FlatBuffers& b, int64_t begin, int64_t end) {
  const SgdCoeffs c = coeffs;
  with_typed_buffers(b, begin, [&](const auto* g, auto* lowp) {
    float* p = b.params + begin;
    float* buf = c.use_momentum ? b.state0 + begin : nullptr;
    const int64_t n = end - begin;
    int64_t i = 0;
    for (; i + V::kWidth <= n; i += V::kWidth) sgd_lanes<V>(c, i, p, g, buf, lowp);
    for (; i < n; ++i) sgd_lanes<VecScalar>(c, i, p, g, buf, lowp);
  });
}

std::pair<double, double> lamb_norms(const LambCoeffs& coeffs, const FlatBuffers& b, int64_t begin, int64_t end) {
  const LambCoeffs c = coeffs;
  std::pair<double, double> out{0.0, 0.0};
  with_typed_buffers(b, begin, [&](const auto* g, auto*) {
    const float* p = b.params + begin;
    float* m = b.state0 + begin;
    float* v = b.state1 + begin;
    const int64_t n = end - begin;
    auto sum_w = V::set1(0.f), sum_u = V::set1(0.f);
    float tail_w = 0.f, tail_u = 0.f;
    int64_t i = 0;
    for (; i + V::kWidth <= n; i += V::kWidth) lamb_moment_lanes<V>(c, i, p, g, m, v, sum_w, sum_u);
    for (; i < n; ++i) lamb_moment_lanes<VecScalar>(c, i, p, g, m, v, tail_w, tail_u);
    out = {V::sum_lanes(sum_w) + tail_w, V::sum_lanes(sum_u) + tail_u};
  });
  return out;
}

void lamb_step(const LambCoeffs& coeffs, float neg_scaled_lr, const FlatBuffers& b, int64_t begin, int64_t end) {
  const LambCoeffs c = coeffs;
  with_typed_buffers(b, begin, [&](const auto*, auto* lowp) {
    float* p = b.params + begin;
    const float* m = b.state0 + begin;
    const float* v = b.state1 + begin;
    const int64_t n = end - begin;
    int64_t i = 0;
    for (; i + V::kWidth <= n; i += V::kWidth) lamb_apply_lanes<V>(c, neg_scaled_lr, i, p, m, v, lowp);
    for (; i < n; ++i) lamb_apply_lanes<VecScalar>(c, neg_scaled_lr, i, p, m, v, lowp);
  });
}
