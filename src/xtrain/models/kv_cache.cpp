// The GPT's incremental decoder (kv_cache.h). Prefill runs the registry's attention kernel over the
// prompt (as the model's forward does). A dense step is one masked batched attention over the pool
// of cache slots; a multi-scale step attends per sequence, a few small GEMMs per head group. Checked against the model's full forward by tests/serve/kv_cache_test.cpp.
#include "xtrain/models/kv_cache.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "xtrain/base/error.h"
#include "xtrain/kernels/activation.h"
#include "xtrain/kernels/attention/registry.h"
#include "xtrain/kernels/ms_attention/windows.h"
#include "xtrain/models/gpt.h"

namespace xtrain::models {

std::vector<SegmentRange> multiscale_ranges(int64_t t, int64_t w) {
  std::vector<SegmentRange> out;
  int64_t e = t + 1;
  for (int64_t size = 1;; size *= 2) {
    const int64_t x = e - w * size;
    const int64_t s = x <= 0 ? 0 : x / (2 * size) * (2 * size);  // max(0, down(x, 2·size))
    if (s < e) out.push_back({s, e, size});
    if (s == 0) break;
    e = s;
  }
  return out;
}

namespace {

using LinearFn = std::function<at::Tensor(const at::Tensor&)>;

// Every sequence's keys and values in one tensor per layer, [slots, NH, seq_len, HS]: a batched
// dense step reads the slots in use as one strided batch (no gather). Grows by doubling (copying).
struct CachePool {
  std::vector<at::Tensor> k, v;
  std::vector<int64_t> free_slots;
  int64_t capacity = 0;
  std::mutex mu;
};

struct GPTState : DecodeState {
  std::shared_ptr<CachePool> pool;
  int64_t slot = 0;
  int64_t cached = 0;  // positions in the cache (the last min(length, seq_len) tokens)
  std::vector<int64_t> tokens;
  ~GPTState() override {
    std::lock_guard<std::mutex> lock(pool->mu);
    pool->free_slots.push_back(slot);
  }
  int64_t length() const override { return static_cast<int64_t>(tokens.size()); }
  at::Tensor k(size_t layer) const { return pool->k[layer].select(0, slot); }  // [NH, seq_len, HS]
  at::Tensor v(size_t layer) const { return pool->v[layer].select(0, slot); }
};

struct Layer {
  nn::LayerNormImpl *ln1, *ln2;
  LinearFn qkv, proj, fc, mlp_proj;
};

// Heads [begin, end) share a window (0: dense).
struct HeadGroup {
  int64_t begin, end, window;
};

class GPTDecoder : public IncrementalDecoder {
 public:
  GPTDecoder(std::shared_ptr<GPTImpl> gpt, DecoderWeights w) : gpt_(std::move(gpt)), w_(std::move(w)) {
    const auto& o = gpt_->options();
    C_ = o.d_model, NH_ = o.heads, HS_ = C_ / NH_, T_ = o.seq_len, V_ = o.vocab;
    wte_ = w_.wte.defined() ? w_.wte : gpt_->wte->weight;
    wpe_ = w_.wpe.defined() ? w_.wpe : gpt_->wpe->weight;
    if (o.attention.type == "multiscale") windows_ = o.attention.windows;
    kernel_ = o.attention.kernel;
    const int64_t S = static_cast<int64_t>(windows_.size());
    for (int64_t s = 0; s < std::max<int64_t>(S, 1); ++s) {
      groups_.push_back(S == 0 ? HeadGroup{0, NH_, 0}
                               : HeadGroup{kernels::ms_attention::group_begin(s, NH_, S),
                                           kernels::ms_attention::group_begin(s + 1, NH_, S), windows_[s]});
    }
    for (size_t i = 0; i < gpt_->blocks->size(); ++i) {
      auto* b = gpt_->blocks[i]->as<nn::BlockImpl>();
      TORCH_INTERNAL_ASSERT(b != nullptr, "kv_cache: blocks[", i, "] is not an nn::Block");
      const std::string p = "blocks." + std::to_string(i) + ".";
      layers_.push_back({b->ln1.get(), b->ln2.get(), linear(p + "attn.qkv", child_linear(*b->attn.ptr(), "qkv")),
                         linear(p + "attn.proj", child_linear(*b->attn.ptr(), "proj")),
                         linear(p + "mlp.fc", b->mlp->fc.ptr()), linear(p + "mlp.proj", b->mlp->proj.ptr())});
    }
    auto it = w_.linears.find("lm_head");
    head_ = it != w_.linears.end() ? it->second : LinearFn([g = gpt_.get()](const at::Tensor& h) { return g->head(h); });
  }

  int64_t max_context() const override { return T_; }
  int64_t vocab() const override { return V_; }

  std::unique_ptr<DecodeState> start() override {
    auto s = std::make_unique<GPTState>();
    s->pool = pool_;
    std::lock_guard<std::mutex> lock(pool_->mu);
    if (pool_->free_slots.empty()) grow();
    s->slot = pool_->free_slots.back();
    pool_->free_slots.pop_back();
    return s;
  }

  at::Tensor prefill(DecodeState& state, const std::vector<int64_t>& tokens) override {
    auto& s = cast(state);
    XTRAIN_USAGE_CHECK(!tokens.empty(), "kv_cache: prefill needs at least one token");
    XTRAIN_USAGE_CHECK(s.tokens.empty(), "kv_cache: prefill on a sequence that already has tokens");
    for (int64_t t : tokens) XTRAIN_USAGE_CHECK(t >= 0 && t < V_, "kv_cache: token ", t, " is outside [0, ", V_, ")");
    s.tokens = tokens;
    at::NoGradGuard no_grad;
    return recompute(s);
  }

  at::Tensor step(const std::vector<DecodeState*>& states, const std::vector<int64_t>& tokens) override;

 private:
  static GPTState& cast(DecodeState& s) {
    auto* g = dynamic_cast<GPTState*>(&s);
    TORCH_INTERNAL_ASSERT(g != nullptr, "kv_cache: a state from another decoder");
    return *g;
  }
  static std::shared_ptr<nn::LinearImpl> child_linear(torch::nn::Module& m, const std::string& name) {
    for (const auto& c : m.named_children()) {
      if (c.key() == name) return std::dynamic_pointer_cast<nn::LinearImpl>(c.value());
    }
    return nullptr;
  }
  LinearFn linear(const std::string& name, std::shared_ptr<nn::LinearImpl> m) const {
    auto it = w_.linears.find(name);
    if (it != w_.linears.end()) return it->second;
    TORCH_INTERNAL_ASSERT(m != nullptr, "kv_cache: no linear layer ", name);
    return [m](const at::Tensor& x) { return m->forward(x); };
  }
  at::Tensor logits(const at::Tensor& x_last) {  // [B, C] -> float CPU [B, V]
    return head_(gpt_->ln_f->forward(x_last)).to(at::kCPU, at::kFloat);
  }
  at::Tensor mlp(const Layer& l, const at::Tensor& h) {
    return l.mlp_proj(kernels::gelu_tanh(l.fc(l.ln2->forward(h)))).add_(h);
  }
  void grow();  // under pool_->mu
  at::Tensor recompute(GPTState& s);
  // One batched dense step's attention: q/k/v new [n, NH, HS] at `positions` of `slots` -> [n, C].
  at::Tensor dense_batch(size_t layer, const at::Tensor& qkv, const std::vector<int64_t>& slots,
                         const std::vector<int64_t>& positions);
  at::Tensor attend(const GPTState& s, size_t layer, int64_t t, const at::Tensor& q);  // q [NH, HS] -> [NH, HS]

  std::shared_ptr<GPTImpl> gpt_;
  DecoderWeights w_;
  int64_t C_, NH_, HS_, T_, V_;
  at::Tensor wte_, wpe_;
  std::vector<int64_t> windows_;
  std::string kernel_;
  std::vector<HeadGroup> groups_;
  std::vector<Layer> layers_;
  LinearFn head_;
  std::shared_ptr<CachePool> pool_ = std::make_shared<CachePool>();
};

void GPTDecoder::grow() {
  const int64_t old = pool_->capacity, cap = std::max<int64_t>(4, 2 * old);
  const auto options = wte_.options().dtype(gpt_->wte->weight.scalar_type());
  for (size_t l = 0; l < layers_.size(); ++l) {
    for (auto* t : {&pool_->k, &pool_->v}) {
      // Zeros, not empty: a batched step multiplies masked-out positions by 0, and 0 · NaN is NaN.
      auto bigger = at::zeros({cap, NH_, T_, HS_}, options);
      if (old > 0) bigger.narrow(0, 0, old).copy_((*t)[l]);
      if (t->size() <= l) {
        t->push_back(bigger);
      } else {
        (*t)[l] = bigger;
      }
    }
  }
  for (int64_t i = cap - 1; i >= old; --i) pool_->free_slots.push_back(i);
  pool_->capacity = cap;
}

at::Tensor GPTDecoder::dense_batch(size_t layer, const at::Tensor& qkv, const std::vector<int64_t>& slots,
                                   const std::vector<int64_t>& positions) {
  const int64_t n = static_cast<int64_t>(slots.size());
  const int64_t S = *std::max_element(slots.begin(), slots.end()) + 1;
  const int64_t L = *std::max_element(positions.begin(), positions.end()) + 1;
  const auto device = wte_.device();
  const auto slot_t = at::tensor(slots, at::kLong).to(device), pos_t = at::tensor(positions, at::kLong).to(device);
  for (auto [cache, part] : {std::make_pair(&pool_->k, 1), std::make_pair(&pool_->v, 2)}) {
    c10::List<c10::optional<at::Tensor>> where;
    where.push_back(slot_t), where.push_back(c10::nullopt), where.push_back(pos_t);
    (*cache)[layer].index_put_(where, qkv.select(1, part));  // [n, NH, HS] into [slot, :, position]
  }
  // Scores for every slot below S (unused ones are ignored), masked past each sequence's position.
  std::vector<float> bias(static_cast<size_t>(S * L), -std::numeric_limits<float>::infinity());
  for (int64_t s = 0; s < S; ++s) bias[s * L] = 0.0f;  // an unused slot: one finite score
  for (int64_t i = 0; i < n; ++i) std::fill_n(bias.begin() + slots[i] * L, positions[i] + 1, 0.0f);
  const auto mask = at::tensor(bias, at::kFloat).to(device).view({S, 1, 1, L});
  auto q = at::zeros({S, NH_, 1, HS_}, qkv.options());
  q.index_copy_(0, slot_t, qkv.select(1, 0).unsqueeze(2));
  const auto K = pool_->k[layer].narrow(0, 0, S).narrow(2, 0, L);
  const auto V = pool_->v[layer].narrow(0, 0, S).narrow(2, 0, L);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS_));
  auto scores = at::matmul(q, K.transpose(2, 3)).mul_(scale).add_(mask);  // [S, NH, 1, L]
  const auto y = at::matmul(at::softmax(scores, -1), V);                 // [S, NH, 1, HS]
  return y.index_select(0, slot_t).reshape({n, C_});
}

// The last min(length, seq_len) tokens at positions 0.. (generate's crop), every layer's K/V cached.
at::Tensor GPTDecoder::recompute(GPTState& s) {
  const int64_t n = std::min<int64_t>(s.length(), T_);
  const auto device = wte_.device();
  const auto ids = at::tensor(std::vector<int64_t>(s.tokens.end() - n, s.tokens.end()), at::kLong).to(device).view({1, n});
  auto x = at::embedding(wte_, ids) + wpe_.narrow(0, 0, n);  // [1, n, C]
  for (size_t l = 0; l < layers_.size(); ++l) {
    const auto& L = layers_[l];
    const auto heads = L.qkv(L.ln1->forward(x)).view({1, n, 3, NH_, HS_}).permute({2, 0, 3, 1, 4});  // [3, 1, NH, n, HS]
    s.k(l).narrow(1, 0, n).copy_(heads[1][0]);
    s.v(l).narrow(1, 0, n).copy_(heads[2][0]);
    auto y = kernels::attention::run_attention(heads[0], heads[1], heads[2], /*causal=*/true, windows_, 0.0, kernel_);
    x = L.proj(y.transpose(1, 2).reshape({1, n, C_})).add_(x);
    x = mlp(L, x);
  }
  s.cached = n;
  return logits(x.select(1, n - 1))[0];
}

at::Tensor GPTDecoder::attend(const GPTState& s, size_t layer, int64_t t, const at::Tensor& q) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS_));
  std::vector<at::Tensor> out;
  for (const auto& g : groups_) {
    const auto K = s.k(layer).narrow(0, g.begin, g.end - g.begin);  // [G, T, HS]
    const auto V = s.v(layer).narrow(0, g.begin, g.end - g.begin);
    at::Tensor keys, values, bias;
    if (g.window == 0) {
      keys = K.narrow(1, 0, t + 1), values = V.narrow(1, 0, t + 1);
    } else {
      std::vector<at::Tensor> ks, vs, bs;
      for (const auto& r : multiscale_ranges(t, g.window)) {
        const int64_t count = (r.end - r.start) / r.size;
        auto pool = [&](const at::Tensor& X) {
          auto part = X.narrow(1, r.start, r.end - r.start);
          return r.size == 1 ? part : part.reshape({X.size(0), count, r.size, HS_}).mean(2);
        };
        ks.push_back(pool(K)), vs.push_back(pool(V));
        bs.push_back(at::full({count}, std::log(static_cast<double>(r.size)), K.options().dtype(at::kFloat)));
      }
      keys = at::cat(ks, 1), values = at::cat(vs, 1), bias = at::cat(bs, 0);
    }
    const auto qg = q.narrow(0, g.begin, g.end - g.begin).unsqueeze(1);  // [G, 1, HS]
    auto scores = at::bmm(qg, keys.transpose(1, 2)).to(at::kFloat).mul_(scale);  // [G, 1, n]
    if (bias.defined()) scores.add_(bias);
    const auto p = at::softmax(scores, -1).to(values.scalar_type());
    out.push_back(at::bmm(p, values).squeeze(1));  // [G, HS]
  }
  return out.size() == 1 ? out[0] : at::cat(out, 0);
}

at::Tensor GPTDecoder::step(const std::vector<DecodeState*>& states, const std::vector<int64_t>& tokens) {
  TORCH_CHECK(states.size() == tokens.size() && !states.empty(), "kv_cache: step needs one token per state");
  at::NoGradGuard no_grad;
  const int64_t B = static_cast<int64_t>(states.size());
  std::vector<at::Tensor> rows(B);
  std::vector<int64_t> batch, positions, ids, slots;  // the sequences with room in their cache
  for (int64_t b = 0; b < B; ++b) {
    auto& s = cast(*states[b]);
    XTRAIN_USAGE_CHECK(tokens[b] >= 0 && tokens[b] < V_, "kv_cache: token ", tokens[b], " is outside [0, ", V_, ")");
    TORCH_CHECK(!s.tokens.empty(), "kv_cache: step before prefill");
    s.tokens.push_back(tokens[b]);
    if (s.cached < T_) {
      batch.push_back(b), positions.push_back(s.cached), ids.push_back(tokens[b]), slots.push_back(s.slot);
    } else {
      rows[b] = recompute(s);  // full context: positions shift, nothing cached stays valid
    }
  }
  if (!batch.empty()) {
    const int64_t n = static_cast<int64_t>(batch.size());
    const auto device = wte_.device();
    const auto pos = at::tensor(positions, at::kLong).to(device);
    auto x = (at::embedding(wte_, at::tensor(ids, at::kLong).to(device)) + wpe_.index_select(0, pos)).view({n, 1, C_});
    for (size_t l = 0; l < layers_.size(); ++l) {
      const auto& L = layers_[l];
      const auto qkv = L.qkv(L.ln1->forward(x)).view({n, 3, NH_, HS_});
      at::Tensor y;
      if (windows_.empty()) {
        y = dense_batch(l, qkv, slots, positions);
      } else {
        std::vector<at::Tensor> ys;
        for (int64_t i = 0; i < n; ++i) {
          auto& s = cast(*states[batch[i]]);
          s.k(l).select(1, positions[i]).copy_(qkv[i][1]);
          s.v(l).select(1, positions[i]).copy_(qkv[i][2]);
          ys.push_back(attend(s, l, positions[i], qkv[i][0]).reshape({C_}));
        }
        y = at::stack(ys, 0);
      }
      x = L.proj(y.view({n, 1, C_})).add_(x);
      x = mlp(L, x);
    }
    const auto out = logits(x.select(1, 0));
    for (int64_t i = 0; i < n; ++i) {
      rows[batch[i]] = out[i];
      cast(*states[batch[i]]).cached += 1;
    }
  }
  return at::stack(rows, 0);
}

}  // namespace

std::shared_ptr<IncrementalDecoder> make_gpt_decoder(std::shared_ptr<GPTImpl> gpt, DecoderWeights weights) {
  TORCH_CHECK(gpt != nullptr, "kv_cache: no model");
  return std::make_shared<GPTDecoder>(std::move(gpt), std::move(weights));
}

}  // namespace xtrain::models
