// The fused attention driver (see fused_driver.h): work items, zig-zag ordering so that the static
// split of at::parallel_for gives each thread as much causal work as the others, and the backward's
// chunked dK/dV reduction.
#include "xtrain/kernels/attention/cpu/fused_driver.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>

namespace xtrain::kernels::attention::cpu {

void TileList::clear(int32_t queries) {
  stride_ = (queries + 15) / 16 * 16;
  tiles_.clear();
  ranges_.clear();
}

void TileList::add(int64_t row0, int32_t rows, int32_t group) {
  Tile t;
  t.row0 = row0;
  t.rows = rows;
  t.group = group;
  tiles_.push_back(t);
  ranges_.resize(tiles_.size() * 2 * stride_, 0);
}

std::vector<Tile>& TileList::tiles() {
  for (size_t t = 0; t < tiles_.size(); ++t) {
    tiles_[t].lo = lo(t);
    tiles_[t].hi = hi(t);
  }
  return tiles_;
}

namespace {

// 0, k-1, 1, k-2, ...: consecutive items alternate cheap and expensive (causal) work.
int64_t zigzag(int64_t j, int64_t k) { return j % 2 == 0 ? j / 2 : k - 1 - j / 2; }

int64_t chunks_per_head(const FusedProblem& p, int64_t nblocks) {
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  return std::max<int64_t>(1, std::min<int64_t>(nblocks, (4 * threads + p.BH - 1) / p.BH));
}

template <typename T>
BlockArgs<T> head_args(const FusedProblem& p, const FusedBuffers<T>& b, const DropoutArgs& dropout, int64_t bh) {
  BlockArgs<T> a;
  a.keys.k = b.k + bh * p.key_rows * p.d;
  a.keys.v = b.v + bh * p.key_rows * p.d;
  a.keys.bias = b.bias;
  a.keys.d = p.d;
  a.dropout = dropout;
  a.dropout.stream = static_cast<uint64_t>(bh);
  a.ldq = a.ldo = a.lddo = a.lddq = p.d;
  a.batch_cols = p.batch_cols;
  return a;
}

// The private dK/dV rows of one backward chunk: per group, global rows [lo, hi) at offset off.
template <typename T>
struct ChunkRows {
  std::vector<int64_t> lo, hi, off;
  std::vector<T> dk, dv;
};

}  // namespace

template <typename T>
void fused_forward(const FusedProblem& p, const FusedBuffers<T>& b, const DropoutArgs& dropout, T* o, T* lse) {
  const int64_t nblocks = (p.n + p.block - 1) / p.block;
  at::parallel_for(0, p.BH * nblocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> scratch;
    TileList list;
    for (int64_t j = begin; j < end; ++j) {
      const int64_t bh = j / nblocks, blk = zigzag(j % nblocks, nblocks);
      const int64_t i0 = blk * p.block;
      const auto m = static_cast<int32_t>(std::min(p.block, p.n - i0));
      list.clear(m);
      p.plan(bh, i0, m, list);
      auto& tiles = list.tiles();
      BlockArgs<T> a = head_args(p, b, dropout, bh);
      a.q = b.q + (bh * p.n + i0) * p.d;
      a.m = m;
      a.query0 = i0;
      a.tiles = tiles.data();
      a.ntiles = static_cast<int>(tiles.size());
      a.o = o + (bh * p.n + i0) * p.d;
      a.lse = lse + bh * p.n + i0;
      forward_block(a, scratch);
    }
  });
}

namespace {

// Backward pass 1 for one chunk: the key rows (per group) its blocks touch, and its private buffers.
template <typename T>
void plan_chunk(const FusedProblem& p, int64_t bh, int64_t blk0, int64_t blk1, TileList& list, ChunkRows<T>& cr) {
  cr.lo.assign(p.num_groups, std::numeric_limits<int64_t>::max());
  cr.hi.assign(p.num_groups, 0);
  cr.off.assign(p.num_groups, 0);
  for (int64_t blk = blk0; blk < blk1; ++blk) {
    const int64_t i0 = blk * p.block;
    const auto m = static_cast<int32_t>(std::min(p.block, p.n - i0));
    list.clear(m);
    p.plan(bh, i0, m, list);
    for (const Tile& t : list.tiles()) {
      cr.lo[t.group] = std::min(cr.lo[t.group], t.row0);
      cr.hi[t.group] = std::max(cr.hi[t.group], t.row0 + t.rows);
    }
  }
  int64_t total = 0;
  for (int g = 0; g < p.num_groups; ++g) {
    cr.off[g] = total;
    if (cr.hi[g] > cr.lo[g]) total += cr.hi[g] - cr.lo[g];
  }
  cr.dk.assign(static_cast<size_t>(total * p.d), T(0));
  cr.dv.assign(static_cast<size_t>(total * p.d), T(0));
}

// Adds every chunk's private rows into the heads' dk, dv, in chunk order.
template <typename T>
void reduce_chunks(const FusedProblem& p, int64_t chunks, const std::vector<ChunkRows<T>>& rows, T* dk, T* dv) {
  at::parallel_for(0, p.BH, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      T* dkh = dk + bh * p.key_rows * p.d;
      T* dvh = dv + bh * p.key_rows * p.d;
      std::fill(dkh, dkh + p.key_rows * p.d, T(0));
      std::fill(dvh, dvh + p.key_rows * p.d, T(0));
      for (int64_t c = 0; c < chunks; ++c) {
        const ChunkRows<T>& cr = rows[bh * chunks + c];
        for (int g = 0; g < p.num_groups; ++g) {
          if (cr.hi[g] <= cr.lo[g]) continue;
          TORCH_INTERNAL_ASSERT(cr.lo[g] >= 0 && cr.hi[g] <= p.key_rows, "attention: tile rows out of range");
          const int64_t count = (cr.hi[g] - cr.lo[g]) * p.d;
          T* gk = dkh + cr.lo[g] * p.d;
          T* gv = dvh + cr.lo[g] * p.d;
          const T* sk = cr.dk.data() + cr.off[g] * p.d;
          const T* sv = cr.dv.data() + cr.off[g] * p.d;
          for (int64_t e = 0; e < count; ++e) {
            gk[e] += sk[e];
            gv[e] += sv[e];
          }
        }
      }
    }
  });
}

}  // namespace

template <typename T>
void fused_backward(const FusedProblem& p, const FusedBuffers<T>& b, const DropoutArgs& dropout, const T* dout,
                    const T* lse, const T* delta, T dq_scale, T* dq, T* dk, T* dv) {
  const int64_t nblocks = (p.n + p.block - 1) / p.block;
  const int64_t chunks = chunks_per_head(p, nblocks);
  // One chunk per head: it accumulates straight into the head's rows; no private buffers.
  const bool direct = chunks == 1;
  std::vector<ChunkRows<T>> rows(direct ? 0 : static_cast<size_t>(p.BH * chunks));
  at::parallel_for(0, p.BH * chunks, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> scratch;
    TileList list;
    for (int64_t j = begin; j < end; ++j) {
      const int64_t bh = j / chunks, c = zigzag(j % chunks, chunks);
      const int64_t blk0 = c * nblocks / chunks, blk1 = (c + 1) * nblocks / chunks;
      BlockArgs<T> a = head_args(p, b, dropout, bh);
      a.dq_scale = dq_scale;
      if (direct) {
        a.dk_local = dk + bh * p.key_rows * p.d;
        a.dv_local = dv + bh * p.key_rows * p.d;
        std::fill(a.dk_local, a.dk_local + p.key_rows * p.d, T(0));
        std::fill(a.dv_local, a.dv_local + p.key_rows * p.d, T(0));
      } else {
        plan_chunk(p, bh, blk0, blk1, list, rows[bh * chunks + c]);
        a.dk_local = rows[bh * chunks + c].dk.data();
        a.dv_local = rows[bh * chunks + c].dv.data();
      }
      for (int64_t blk = blk0; blk < blk1; ++blk) {
        const int64_t i0 = blk * p.block;
        const auto m = static_cast<int32_t>(std::min(p.block, p.n - i0));
        list.clear(m);
        p.plan(bh, i0, m, list);
        auto& tiles = list.tiles();
        for (Tile& t : tiles) {
          const ChunkRows<T>* cr = direct ? nullptr : &rows[bh * chunks + c];
          t.local = direct ? t.row0 : cr->off[t.group] + (t.row0 - cr->lo[t.group]);
        }
        a.q = b.q + (bh * p.n + i0) * p.d;
        a.m = m;
        a.query0 = i0;
        a.tiles = tiles.data();
        a.ntiles = static_cast<int>(tiles.size());
        a.dout = dout + (bh * p.n + i0) * p.d;
        a.lse_in = lse + bh * p.n + i0;
        a.delta = delta + bh * p.n + i0;
        a.dq = dq + (bh * p.n + i0) * p.d;
        backward_block(a, scratch);
      }
    }
  });
  if (!direct) reduce_chunks(p, chunks, rows, dk, dv);
}

template void fused_forward<float>(const FusedProblem&, const FusedBuffers<float>&, const DropoutArgs&, float*,
                                   float*);
template void fused_forward<double>(const FusedProblem&, const FusedBuffers<double>&, const DropoutArgs&, double*,
                                    double*);
template void fused_backward<float>(const FusedProblem&, const FusedBuffers<float>&, const DropoutArgs&, const float*,
                                    const float*, const float*, float, float*, float*, float*);
template void fused_backward<double>(const FusedProblem&, const FusedBuffers<double>&, const DropoutArgs&,
                                     const double*, const double*, const double*, double, double*, double*, double*);

}  // namespace xtrain::kernels::attention::cpu
