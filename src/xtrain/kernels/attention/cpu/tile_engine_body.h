// The tile engine's body, written once against a vector type `V` (vec.h). Deliberately no include
// guard and no includes: tile_engine.cpp includes it once per ISA inside a namespace that defines
// `V` and under the matching `#pragma GCC target`. See tile_engine.h for the contract.
// Layout: scores are kept key-major, sᵀ[key row][query], so the softmax runs vectorised across
// the block's queries and a tile of any height (a multi-scale level's w + 2 rows, a dense tile's
// 64) is a GEMM with the queries as the vector dimension: no transposed or packed copies of K, V.

using E = typename V::Elem;
using R = typename V::R;
constexpr int kW = V::kWidth;

// C[M x N] (+)= A[M x K] · B[K x N]; A(m, k) = a[m*sam + k*sak] (so A may be a transposed view), B and
// C row-major. One MR x NV-vector register tile of C per pass; the last vector holds n_last lanes.
template <int MR, int NV>
inline void micro(int K, const E* a, int64_t sam, int64_t sak, const E* b, int64_t ldb, E* c, int64_t ldc, int n_last,
                  bool accumulate) {
  // The unroll pragmas keep acc[][] in registers (-O2 would not unroll these loops and would spill
  // every accumulator to the stack on each FMA).
  R acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const int lanes = j == NV - 1 ? n_last : kW;
      acc[i][j] = accumulate ? V::load_n(c + i * ldc + j * kW, lanes) : V::zero();
    }
  }
  for (int k = 0; k < K; ++k) {
    R bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) bv[j] = j == NV - 1 ? V::load_n(b + k * ldb + j * kW, n_last) : V::load(b + k * ldb + j * kW);
    const E* ak = a + k * sak;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const R av = V::set1(ak[i * sam]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = V::fmadd(av, bv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) V::store_n(c + i * ldc + j * kW, acc[i][j], j == NV - 1 ? n_last : kW);
  }
}

template <int MR, int NV>
inline void micro_if_fits(int K, const E* a, int64_t sam, int64_t sak, const E* b, int64_t ldb, E* c, int64_t ldc,
                          int n_last, bool accumulate) {
  if constexpr (NV <= V::kMaxVecs && MR <= V::rows_for(NV)) micro<MR, NV>(K, a, sam, sak, b, ldb, c, ldc, n_last, accumulate);
}

template <int MR>
inline void micro_rows(int nv, int K, const E* a, int64_t sam, int64_t sak, const E* b, int64_t ldb, E* c,
                       int64_t ldc, int n_last, bool accumulate) {
  switch (nv) {
    case 1: return micro_if_fits<MR, 1>(K, a, sam, sak, b, ldb, c, ldc, n_last, accumulate);
    case 2: return micro_if_fits<MR, 2>(K, a, sam, sak, b, ldb, c, ldc, n_last, accumulate);
    case 3: return micro_if_fits<MR, 3>(K, a, sam, sak, b, ldb, c, ldc, n_last, accumulate);
    default: return micro_if_fits<MR, 4>(K, a, sam, sak, b, ldb, c, ldc, n_last, accumulate);
  }
}

using MicroRows = void (*)(int, int, const E*, int64_t, int64_t, const E*, int64_t, E*, int64_t, int, bool);
constexpr MicroRows kMicroRows[6] = {micro_rows<1>, micro_rows<2>, micro_rows<3>,
                                     micro_rows<4>, micro_rows<5>, micro_rows<6>};

// The register tile's height comes from V::rows_for(vectors), at most 6 (12 rows for the narrow
// 2-vector panels measured no faster than 6 on AVX-512 here).
inline void gemm(int M, int N, int K, const E* a, int64_t sam, int64_t sak, const E* b, int64_t ldb, E* c,
                 int64_t ldc, bool accumulate) {
  constexpr int kPanel = V::kMaxVecs * kW;
  for (int n0 = 0; n0 < N; n0 += kPanel) {
    const int nn = N - n0 < kPanel ? N - n0 : kPanel;
    const int nv = (nn + kW - 1) / kW, n_last = nn - (nv - 1) * kW;
    const int step = V::rows_for(nv);
    for (int m0 = 0; m0 < M; m0 += step) {
      const int mr = M - m0 < step ? M - m0 : step;
      kMicroRows[mr - 1](nv, K, a + m0 * sam, sam, sak, b + n0, ldb, c + m0 * ldc + n0, ldc, n_last, accumulate);
    }
  }
}

inline int64_t round_up(int64_t x) { return (x + kW - 1) / kW * kW; }

// Consecutive tiles scored together (at most batch_cols key rows): one softmax update per batch.
struct Batch {
  int t0 = 0, t1 = 0;  // tiles [t0, t1)
  int64_t cols = 0;    // their rows, together
};

inline std::vector<Batch> make_batches(const BlockArgs<E>& a) {
  std::vector<Batch> out;
  for (int t = 0; t < a.ntiles; ++t) {
    if (out.empty() || out.back().cols + a.tiles[t].rows > a.batch_cols) out.push_back(Batch{t, t, 0});
    out.back().t1 = t + 1;
    out.back().cols += a.tiles[t].rows;
  }
  return out;
}

inline int64_t widest(const std::vector<Batch>& batches) {
  int64_t w = 1;
  for (const Batch& b : batches) w = b.cols > w ? b.cols : w;
  return w;
}

// xt[j][q] = x[q][j] for q < m, 0 for m <= q < mp.
inline void transpose_block(const E* x, int64_t ldx, int m, int64_t d, int64_t mp, E* xt) {
  for (int64_t j = 0; j < d; ++j) {
    E* row = xt + j * mp;
    for (int q = 0; q < m; ++q) row[q] = x[q * ldx + j];
    for (int64_t q = m; q < mp; ++q) row[q] = E(0);
  }
}

// sᵀ rows of every tile of the batch: sᵀ[off + r][q] = key(row0 + r) · x[q] for x = qᵀ or doutᵀ.
inline void tile_products(const BlockArgs<E>& a, const Batch& b, const E* rows, const E* xt, int64_t mp, E* st) {
  const int64_t d = a.keys.d;
  int64_t off = 0;
  for (int t = b.t0; t < b.t1; ++t) {
    const Tile& tile = a.tiles[t];
    gemm(tile.rows, static_cast<int>(mp), static_cast<int>(d), rows + tile.row0 * d, d, 1, xt, mp, st + off * mp, mp,
         false);
    off += tile.rows;
  }
}

// For query lanes [qv, qv + kW): adds the bias and hides the rows a query does not see (-inf);
// returns the lane-wise max over the batch.
inline R mask_scores(const BlockArgs<E>& a, const Batch& b, int64_t qv, int64_t mp, E* st) {
  const E ninf = -std::numeric_limits<E>::infinity();
  R vmax = V::set1(ninf);
  int64_t off = 0;
  for (int t = b.t0; t < b.t1; ++t) {
    const Tile& tile = a.tiles[t];
    for (int r = 0; r < tile.rows; ++r) {
      E* x = st + (off + r) * mp + qv;
      R v = V::load(x);
      if (a.keys.bias != nullptr) v = V::add(v, V::set1(a.keys.bias[tile.row0 + r]));
      v = V::keep_rows(v, r, tile.lo + qv, tile.hi + qv, ninf);
      V::store(x, v);
      vmax = V::max(vmax, v);
    }
    off += tile.rows;
  }
  return vmax;
}

// p = exp(s - shift) in place over the batch's rows, lanes [qv, qv + kW); returns the lane sums.
inline R exp_scores(int64_t cols, int64_t qv, int64_t mp, R shift, E* st) {
  R vsum = V::zero();
  for (int64_t r = 0; r < cols; ++r) {
    E* x = st + r * mp + qv;
    const R p = V::exp(V::sub(V::load(x), shift));
    V::store(x, p);
    vsum = V::add(vsum, p);
  }
  return vsum;
}

// Multiplies p (and g when given) by the dropout factor of every visible (row, query) of the batch.
inline void dropout_scores(const BlockArgs<E>& a, const Batch& b, int64_t mp, E* p, E* g) {
  const uint32_t threshold = dropout_threshold(a.dropout.p);
  const E keep_scale = static_cast<E>(1.0 / (1.0 - a.dropout.p));
  int64_t off = 0;
  for (int t = b.t0; t < b.t1; ++t) {
    const Tile& tile = a.tiles[t];
    for (int q = 0; q < a.m; ++q) {
      const auto query = static_cast<uint64_t>(a.query0 + q);
      for (int r = tile.lo[q]; r < tile.hi[q]; ++r) {
        const bool keep = dropout_keep(a.dropout.seed, a.dropout.stream, query, static_cast<uint64_t>(tile.row0 + r),
                                       threshold);
        const E z = keep ? keep_scale : E(0);
        p[(off + r) * mp + q] *= z;
        if (g != nullptr) g[(off + r) * mp + q] *= z;
      }
    }
    off += tile.rows;
  }
}

inline void scale_row(E* x, int64_t d, E factor) {
  const R f = V::set1(factor);
  for (int64_t j = 0; j < d; j += kW) {
    const int lanes = d - j < kW ? static_cast<int>(d - j) : kW;
    V::store_n(x + j, V::mul(V::load_n(x + j, lanes), f), lanes);
  }
}

// acc[q] += Σ_r pᵀ[off + r][q] · rows[row0 + r] over the batch's tiles (C = Pᵀᵀ · V per tile).
inline void tile_weighted_sum(const BlockArgs<E>& a, const Batch& b, const E* pt, int64_t mp, const E* rows, E* acc) {
  const int64_t d = a.keys.d;
  int64_t off = 0;
  for (int t = b.t0; t < b.t1; ++t) {
    const Tile& tile = a.tiles[t];
    gemm(a.m, static_cast<int>(d), tile.rows, pt + off * mp, 1, mp, rows + tile.row0 * d, d, acc, d, true);
    off += tile.rows;
  }
}

// One batch of the forward pass: online softmax update of (mrow, lrow, acc) for every query.
inline void forward_batch(const BlockArgs<E>& a, const Batch& b, const E* qt, int64_t mp, E* st, E* mrow, E* lrow,
                          E* alpha, E* acc) {
  tile_products(a, b, a.keys.k, qt, mp, st);
  for (int64_t qv = 0; qv < mp; qv += kW) {
    const R mold = V::load(mrow + qv);
    const R mnew = V::max(mold, mask_scores(a, b, qv, mp, st));
    // Lanes that have seen nothing yet (mnew = -inf) shift by 0: their p and alpha are 0.
    const R shift = V::finite_or_zero(mnew);
    const R al = V::exp(V::sub(mold, shift));
    V::store(alpha + qv, al);
    V::store(lrow + qv, V::add(V::mul(V::load(lrow + qv), al), exp_scores(b.cols, qv, mp, shift, st)));
    V::store(mrow + qv, mnew);
  }
  for (int q = 0; q < a.m; ++q) {
    if (alpha[q] != E(1)) scale_row(acc + q * a.keys.d, a.keys.d, alpha[q]);
  }
  if (a.dropout.p > 0) dropout_scores(a, b, mp, st, nullptr);
  tile_weighted_sum(a, b, st, mp, a.keys.v, acc);
}

void forward_block_impl(const BlockArgs<E>& a, std::vector<E>& scratch) {
  const int m = a.m;
  const int64_t d = a.keys.d, mp = round_up(m);
  const auto batches = make_batches(a);
  scratch.resize(static_cast<size_t>(widest(batches) * mp + d * mp + m * d + 3 * mp));
  E* st = scratch.data();
  E* qt = st + widest(batches) * mp;
  E* acc = qt + d * mp;
  E* mrow = acc + m * d;
  E* lrow = mrow + mp;
  E* alpha = lrow + mp;
  transpose_block(a.q, a.ldq, m, d, mp, qt);
  std::fill(acc, acc + m * d, E(0));
  std::fill(mrow, mrow + mp, -std::numeric_limits<E>::infinity());
  std::fill(lrow, lrow + mp, E(0));
  for (const Batch& b : batches) forward_batch(a, b, qt, mp, st, mrow, lrow, alpha, acc);
  for (int q = 0; q < m; ++q) {
    E* orow = a.o + q * a.ldo;
    const E inv = E(1) / lrow[q];
    for (int64_t j = 0; j < d; ++j) orow[j] = acc[q * d + j] * inv;
    a.lse[q] = mrow[q] + std::log(lrow[q]);
  }
}

// pᵀ = exp(sᵀ - lse) (hidden rows 0), pdᵀ = dropped-out pᵀ, gᵀ = dSᵀ = pᵀ ∘ (dPᵀ ∘ z - delta).
inline void backward_scores(const BlockArgs<E>& a, const Batch& b, const E* lse, const E* delta, int64_t mp, E* pt,
                            E* gt, E* pdt) {
  for (int64_t qv = 0; qv < mp; qv += kW) {
    mask_scores(a, b, qv, mp, pt);
    exp_scores(b.cols, qv, mp, V::load(lse + qv), pt);
  }
  if (pdt != pt) {
    std::copy(pt, pt + b.cols * mp, pdt);
    dropout_scores(a, b, mp, pdt, gt);
  }
  for (int64_t qv = 0; qv < mp; qv += kW) {
    const R dv = V::load(delta + qv);
    for (int64_t r = 0; r < b.cols; ++r) {
      E* g = gt + r * mp + qv;
      V::store(g, V::mul(V::load(pt + r * mp + qv), V::sub(V::load(g), dv)));
    }
  }
}

void backward_block_impl(const BlockArgs<E>& a, std::vector<E>& scratch) {
  const int m = a.m;
  const int64_t d = a.keys.d, mp = round_up(m);
  const auto batches = make_batches(a);
  const bool drop = a.dropout.p > 0;
  const int64_t cols = widest(batches);
  scratch.resize(static_cast<size_t>((drop ? 3 : 2) * cols * mp + 2 * d * mp + m * d + 2 * mp));
  E* pt = scratch.data();
  E* gt = pt + cols * mp;
  E* qt = gt + cols * mp;
  E* dot = qt + d * mp;
  E* dqacc = dot + d * mp;
  E* lse = dqacc + m * d;
  E* delta = lse + mp;
  E* pdt = drop ? delta + mp : pt;
  transpose_block(a.q, a.ldq, m, d, mp, qt);
  transpose_block(a.dout, a.lddo, m, d, mp, dot);
  std::fill(dqacc, dqacc + m * d, E(0));
  std::fill(lse, lse + mp, E(0));
  std::fill(delta, delta + mp, E(0));
  std::copy(a.lse_in, a.lse_in + m, lse);
  std::copy(a.delta, a.delta + m, delta);
  for (const Batch& b : batches) {
    tile_products(a, b, a.keys.k, qt, mp, pt);   // Sᵀ
    tile_products(a, b, a.keys.v, dot, mp, gt);  // dPᵀ
    backward_scores(a, b, lse, delta, mp, pt, gt, pdt);
    int64_t off = 0;
    for (int t = b.t0; t < b.t1; ++t) {
      const Tile& tile = a.tiles[t];
      E* dv_tile = a.dv_local + tile.local * d;
      E* dk_tile = a.dk_local + tile.local * d;
      gemm(tile.rows, static_cast<int>(d), m, pdt + off * mp, mp, 1, a.dout, a.lddo, dv_tile, d, true);  // dV += Pdᵀ·dO
      gemm(tile.rows, static_cast<int>(d), m, gt + off * mp, mp, 1, a.q, a.ldq, dk_tile, d, true);       // dK += dSᵀ·Q
      off += tile.rows;
    }
    tile_weighted_sum(a, b, gt, mp, a.keys.k, dqacc);  // dQ += dS·K
  }
  for (int q = 0; q < m; ++q) {
    E* dqrow = a.dq + q * a.lddq;
    for (int64_t j = 0; j < d; ++j) dqrow[j] = dqacc[q * d + j] * a.dq_scale;
  }
}
