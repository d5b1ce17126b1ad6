// The 8-bit Adam step (adam8bit.h): per-group coefficients as adam.cpp, then the fused block kernel
// (cpu/quant8.h) over every block that holds an element of a segment, in parallel by blocks.
#include "xtrain/optim/adam8bit.h"

#include <ATen/Parallel.h>
#include <ATen/ops/zeros.h>

#include <algorithm>

#include "xtrain/optim/adam.h"
#include "xtrain/optim/cpu/quant8.h"
#include "xtrain/optim/flat_step.h"

namespace xtrain::optim {

Adam8bit::Adam8bit(const AdamParams& params, bool decoupled, std::string name)
    : params_(params), decoupled_(decoupled), name_(std::move(name)) {}

void Adam8bit::init_state(int64_t numel) {
  // All-zero codes with absmax 0 dequantise to 0: the moments start at zero.
  exp_avg_ = at::zeros({numel}, at::kChar);
  exp_avg_sq_ = at::zeros({numel}, at::kByte);
  exp_avg_absmax_ = at::zeros({cpu::quant_blocks(numel)}, at::kFloat);
  exp_avg_sq_absmax_ = at::zeros({cpu::quant_blocks(numel)}, at::kFloat);
}

void Adam8bit::step(const StepInputs& in) {
  std::vector<Segment> whole;
  const int64_t numel = exp_avg_.defined() ? exp_avg_.numel() : -1;
  const auto& segments = detail::checked_segments(in, numel, name_ + " (state_dtype int8)", whole);
  const auto coeffs = adam_coefficients(params_, decoupled_, step_count_, in);
  cpu::Adam8bitBuffers b;
  b.params = in.params.data_ptr<float>();
  b.grads = in.grads.data_ptr();
  b.grad_type = in.grads.scalar_type();
  b.exp_avg = exp_avg_.data_ptr<int8_t>();
  b.exp_avg_sq = exp_avg_sq_.data_ptr<uint8_t>();
  b.exp_avg_absmax = exp_avg_absmax_.data_ptr<float>();
  b.exp_avg_sq_absmax = exp_avg_sq_absmax_.data_ptr<float>();
  if (in.params_lowp.defined()) {
    b.lowp = in.params_lowp.data_ptr();
    b.lowp_type = in.params_lowp.scalar_type();
  }
  b.numel = numel;
  if (!segments.empty()) {
    const int64_t first = segments.front().offset / cpu::kQuantBlock;
    const int64_t last = cpu::quant_blocks(segments.back().offset + segments.back().numel);
    const int64_t grain = std::max<int64_t>(1, detail::kGrain / cpu::kQuantBlock);
    at::parallel_for(first, last, grain, [&](int64_t begin, int64_t end) {
      std::vector<cpu::BlockRun> runs;
      const int64_t lo0 = begin * cpu::kQuantBlock;
      auto it = std::upper_bound(segments.begin(), segments.end(), lo0,
                                 [](int64_t x, const Segment& s) { return x < s.offset + s.numel; });
      for (int64_t blk = begin; blk < end; ++blk) {
        const int64_t lo = blk * cpu::kQuantBlock, hi = std::min(numel, lo + cpu::kQuantBlock);
        runs.clear();
        for (auto s = it; s != segments.end() && s->offset < hi; ++s) {
          const int64_t rb = std::max(lo, s->offset), re = std::min(hi, s->offset + s->numel);
          if (rb < re) runs.push_back({rb, re, &coeffs[s->group]});
        }
        if (!runs.empty()) cpu::adam8bit_block(b, blk, runs.data(), static_cast<int>(runs.size()));
        while (it != segments.end() && it->offset + it->numel <= hi) ++it;
      }
    });
  }
  ++step_count_;
}

std::vector<std::pair<std::string, at::Tensor>> Adam8bit::state() {
  return {{"exp_avg", exp_avg_},
          {"exp_avg_sq", exp_avg_sq_},
          {"exp_avg_absmax", exp_avg_absmax_},
          {"exp_avg_sq_absmax", exp_avg_sq_absmax_}};
}

bool state_is_blockwise(const std::vector<std::pair<std::string, at::Tensor>>& state, int64_t numel) {
  for (const auto& [name, t] : state) {
    if (t.defined() && (t.scalar_type() != at::kFloat || t.numel() != numel)) return true;
  }
  return false;
}

}  // namespace xtrain::optim
