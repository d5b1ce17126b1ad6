// Runs the tile engine over every (head, query block) of a call, multi-threaded with at::parallel_for.
// A kernel supplies a planner (the key tiles of one query block) and its key arrays; the driver
// owns threading and the backward's dK/dV reduction. Design choice: backward splits each head's
// queries into a few chunks; a chunk accumulates dK/dV for the key rows it touches in private
// buffers (one row range per tile group), summed into the head's rows afterwards in chunk order,
// so results are deterministic for a given thread count and never race.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "xtrain/kernels/attention/cpu/tile_engine.h"

namespace xtrain::kernels::attention::cpu {

// Tiles of one query block, with storage for their per-query [lo, hi) ranges.
class TileList {
 public:
  void clear(int32_t queries);
  // A tile over rows [row0, row0 + rows); set its ranges through lo()/hi() before the next add().
  void add(int64_t row0, int32_t rows, int32_t group);
  int32_t* lo(size_t tile) { return ranges_.data() + tile * 2 * stride_; }
  int32_t* hi(size_t tile) { return lo(tile) + stride_; }
  std::vector<Tile>& tiles();  // final views (pointers into the range storage)
  size_t size() const { return tiles_.size(); }

 private:
  int32_t stride_ = 0;  // queries rounded up to 16 lanes
  std::vector<Tile> tiles_;
  std::vector<int32_t> ranges_;
};

struct FusedProblem {
  int64_t BH = 0, NH = 1, n = 0, d = 0;
  int64_t key_rows = 0;  // rows of each head's key arrays
  int64_t block = 64;    // queries per block
  int num_groups = 1;    // tiles' group ids are below this
  int64_t batch_cols = 512;  // key rows scored together (tile_engine.h)
  // Fills `out` with the tiles that queries [i0, i0 + m) of flat head bh see.
  std::function<void(int64_t bh, int64_t i0, int32_t m, TileList& out)> plan;
};

// Every array is contiguous per flat head (b*NH + h): q, o, dout, dq [BH][n][d]; k, v, dk, dv
// [BH][key_rows][d]; lse, delta [BH][n]; bias [key_rows] shared by all heads.
template <typename T>
struct FusedBuffers {
  const T* q = nullptr;  // scaled by 1/sqrt(d)
  const T* k = nullptr;
  const T* v = nullptr;
  const T* bias = nullptr;
};

// dropout.stream is ignored: the driver sets it per head.
template <typename T>
void fused_forward(const FusedProblem& p, const FusedBuffers<T>& b, const DropoutArgs& dropout, T* o, T* lse);

// Writes dq (times dq_scale) and the key rows' dk, dv (every row written).
template <typename T>
void fused_backward(const FusedProblem& p, const FusedBuffers<T>& b, const DropoutArgs& dropout, const T* dout,
                    const T* lse, const T* delta, T dq_scale, T* dq, T* dk, T* dv);

}  // namespace xtrain::kernels::attention::cpu
