// The 8-bit moments of Adam (adam8bit.h): the fused block kernel (cpu/quant8.h) over every block
// that holds an element of a segment, in parallel by blocks.
#include "xtrain/optim/adam8bit.h"

#include <ATen/Parallel.h>
#include <ATen/ops/zeros.h>

#include <algorithm>

#include "xtrain/optim/cpu/quant8.h"
#include "xtrain/optim/flat_step.h"

namespace xtrain::optim {

namespace {

// Calls fn(block, runs, num_runs) for every block holding an element of `segments`, in parallel;
// runs are the block's pieces of segments, each with its group's coefficients.
template <class F>
void for_each_block(const std::vector<Segment>& segments, const std::vector<cpu::AdamCoeffs>& coeffs, int64_t numel,
                    F&& fn) {
  if (segments.empty()) return;
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
      if (!runs.empty()) fn(blk, runs.data(), static_cast<int>(runs.size()));
      while (it != segments.end() && it->offset + it->numel <= hi) ++it;
    }
  });
}

class Int8Moments final : public AdamMoments {
 public:
  void init(int64_t numel) override {
    // All-zero codes with absmax 0 dequantise to 0: the moments start at zero.
    exp_avg_ = at::zeros({numel}, at::kChar);
    exp_avg_sq_ = at::zeros({numel}, at::kByte);
    exp_avg_absmax_ = at::zeros({cpu::quant_blocks(numel)}, at::kFloat);
    exp_avg_sq_absmax_ = at::zeros({cpu::quant_blocks(numel)}, at::kFloat);
  }
  int64_t numel() const override { return exp_avg_.defined() ? exp_avg_.numel() : -1; }
  bool allows_cuda() const override { return false; }
  std::string describe(const std::string& optimizer_name) const override {
    return optimizer_name + " (state_dtype int8)";
  }

  void update(const StepInputs& in, const std::vector<Segment>& segments,
              const std::vector<cpu::AdamCoeffs>& coeffs) override {
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
    b.numel = numel();
    for_each_block(segments, coeffs, b.numel, [&](int64_t blk, const cpu::BlockRun* runs, int num_runs) {
      cpu::adam8bit_block(b, blk, runs, num_runs);
    });
  }

  std::vector<std::pair<std::string, at::Tensor>> tensors() override {
    return {{"exp_avg", exp_avg_},
            {"exp_avg_sq", exp_avg_sq_},
            {"exp_avg_absmax", exp_avg_absmax_},
            {"exp_avg_sq_absmax", exp_avg_sq_absmax_}};
  }

 private:
  at::Tensor exp_avg_, exp_avg_sq_, exp_avg_absmax_, exp_avg_sq_absmax_;
};

}  // namespace

std::unique_ptr<AdamMoments> int8_adam_moments() { return std::make_unique<Int8Moments>(); }

bool state_is_blockwise(const std::vector<std::pair<std::string, at::Tensor>>& state, int64_t numel) {
  for (const auto& [name, t] : state) {
    if (t.defined() && (t.scalar_type() != at::kFloat || t.numel() != numel)) return true;
  }
  return false;
}

}  // namespace xtrain::optim
