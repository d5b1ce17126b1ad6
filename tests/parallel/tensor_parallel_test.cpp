// Tensor-parallel layers against the single-rank layers they split, computed in every worker
// without communication, 2 ranks over Gloo: the nn::Linear MLP (fc -> gelu -> proj, as Megatron's
// ParallelMLP) with the column output kept split (row input_is_parallel) and gathered then
// scattered again; a tied embedding + LM head + cross-entropy with the vocabulary split; causal
// self-attention with the heads split, against nn::CausalSelfAttention; a whole transformer block
// against nn::Block. Compared:
// outputs, losses, the input gradient and each rank's slice of every parameter gradient. A group of
// one is bit-identical to nn::Linear.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <functional>

#include "support/fixtures.h"
#include "support/multiprocess.h"
#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/nn/block.h"
#include "xtrain/nn/causal_self_attention.h"
#include "xtrain/nn/embedding.h"
#include "xtrain/nn/linear.h"
#include "xtrain/parallel/tensor/column_parallel_linear.h"
#include "xtrain/parallel/tensor/parallel_block.h"
#include "xtrain/parallel/tensor/parallel_self_attention.h"
#include "xtrain/parallel/tensor/row_parallel_linear.h"
#include "xtrain/parallel/tensor/shard_spec.h"
#include "xtrain/parallel/tensor/vocab_parallel_cross_entropy.h"
#include "xtrain/parallel/tensor/vocab_parallel_embedding.h"

namespace xtrain::parallel::tensor::tensor_parallel_test {
namespace {

using xtrain::testing::expect_close;
using xtrain::testing::expect_equal;

constexpr int64_t kIn = 8, kHidden = 16;

struct Result {
  at::Tensor y, dx, fc_w, fc_b, proj_w, proj_b;  // fc_* / proj_w: this rank's slice
};

// The reference: full layers from seed 5, then the batch from seed 6.
Result reference(int64_t rank, int64_t tp) {
  torch::manual_seed(5);
  nn::Linear fc(kIn, kHidden), proj(kHidden, kIn);
  torch::manual_seed(6);
  const auto x = at::randn({3, 5, kIn}).requires_grad_();
  const auto g = at::randn({3, 5, kIn});
  const auto y = proj->forward(at::gelu(fc->forward(x), "tanh"));
  (y * g).sum().backward();
  const int64_t h = kHidden / tp;
  return {y.detach(), x.grad(), fc->weight.grad().narrow(0, rank * h, h), fc->bias.grad().narrow(0, rank * h, h),
          proj->weight.grad().narrow(1, rank * h, h), proj->bias.grad()};
}

Result tensor_parallel(const CommPtr& tp, bool gather) {
  torch::manual_seed(5);
  ColumnParallelLinear fc(kIn, kHidden, tp, /*bias=*/true, /*gather_output=*/gather);
  RowParallelLinear proj(kHidden, kIn, tp, /*bias=*/true, /*input_is_parallel=*/!gather);
  torch::manual_seed(6);
  const auto x = at::randn({3, 5, kIn}).requires_grad_();
  const auto g = at::randn({3, 5, kIn});
  const auto y = proj->forward(at::gelu(fc->forward(x), "tanh"));
  (y * g).sum().backward();
  return {y.detach(), x.grad(), fc->weight.grad(), fc->bias.grad(), proj->weight.grad(), proj->bias.grad()};
}

void compare(const Result& got, const Result& want, const std::string& what) {
  // The row-parallel output sums tp partial GEMMs (one rounding each) instead of one GEMM over
  // all 16 inputs, and the copy's all-reduce does the same for dx: fp32 sums of 16 terms.
  const double rtol = 1e-5, atol = 1e-6;
  expect_close(got.y, want.y, rtol, atol, what + " y");
  expect_close(got.dx, want.dx, rtol, atol, what + " dx");
  expect_close(got.fc_w, want.fc_w, rtol, atol, what + " fc.weight grad");
  expect_close(got.fc_b, want.fc_b, rtol, atol, what + " fc.bias grad");
  expect_close(got.proj_w, want.proj_w, rtol, atol, what + " proj.weight grad");
  expect_close(got.proj_b, want.proj_b, rtol, atol, what + " proj.bias grad");
}

constexpr int64_t kVocab = 16, kDim = 8;

struct LmResult {
  at::Tensor tokens, loss, grad;  // per-token losses [3, 5], mean loss, this rank's rows of wte's gradient
};

// Tied embedding and head, mean cross-entropy: at::embedding, matmul, at::cross_entropy_loss.
LmResult lm_reference(int64_t rank, int64_t tp) {
  torch::manual_seed(7);
  nn::Embedding wte(kVocab, kDim);
  torch::manual_seed(8);
  const auto idx = at::randint(0, kVocab, {3, 5});
  const auto target = at::randint(0, kVocab, {3, 5});
  const auto logits = at::matmul(wte->forward(idx), wte->weight.t());
  const auto tokens = at::cross_entropy_loss(logits.reshape({-1, kVocab}), target.reshape({-1}), {},
                                             at::Reduction::None).view({3, 5});
  const auto loss = tokens.mean();
  loss.backward();
  const int64_t n = kVocab / tp;
  return {tokens.detach(), loss.detach(), wte->weight.grad().narrow(0, rank * n, n)};
}

LmResult lm_tensor_parallel(const CommPtr& tp) {
  torch::manual_seed(7);
  VocabParallelEmbedding wte(kVocab, kDim, tp);
  torch::manual_seed(8);
  const auto idx = at::randint(0, kVocab, {3, 5});
  const auto target = at::randint(0, kVocab, {3, 5});
  // The tied head is column-parallel over the vocabulary: copy, then this rank's rows of wte.
  const auto logits = at::matmul(copy_to_tensor_parallel(wte->forward(idx), tp), wte->weight.t());
  const auto tokens = vocab_parallel_cross_entropy(logits, target, tp);
  const auto loss = tokens.mean();
  loss.backward();
  return {tokens.detach(), loss.detach(), wte->weight.grad()};
}

void compare_lm(const LmResult& got, const LmResult& want, const std::string& what) {
  // log-sum-exp with the max subtracted and sums split over ranks vs PyTorch's log_softmax: fp32
  // rounding of 16-term sums.
  expect_close(got.tokens, want.tokens, 1e-5, 1e-6, what + " per-token loss");
  expect_close(got.loss, want.loss, 1e-5, 1e-6, what + " loss");
  expect_close(got.grad, want.grad, 1e-5, 1e-6, what + " wte grad");
}

constexpr int64_t kC = 16, kHeads = 4;

// Rank r's rows of each of `stride` equal blocks of `full`'s first dimension, in block order.
at::Tensor strided_rows(const at::Tensor& full, int64_t r, int64_t tp, int64_t stride) {
  const int64_t block = full.size(0) / stride, n = block / tp;
  std::vector<at::Tensor> parts;
  for (int64_t s = 0; s < stride; ++s) parts.push_back(full.narrow(0, s * block + r * n, n));
  return at::cat(parts, 0);
}

std::vector<at::Tensor> attention_run(torch::nn::Module& module, const std::function<at::Tensor(const at::Tensor&)>& fn) {
  torch::manual_seed(22);
  const auto x = at::randn({2, 6, kC}).requires_grad_();
  const auto g = at::randn({2, 6, kC});
  const auto y = fn(x);
  (y * g).sum().backward();
  std::vector<at::Tensor> out{y.detach(), x.grad()};
  for (const auto& p : module.named_parameters()) out.push_back(p.value().grad());  // qkv.w, qkv.b, proj.w, proj.b
  return out;
}

void check_attention(const CommPtr& tp) {
  const int64_t r = tp->rank(), n = tp->size(), c = kC / n;
  torch::manual_seed(21);
  nn::CausalSelfAttention full(kC, kHeads, 8, 0.0);
  auto want = attention_run(*full, [&](const at::Tensor& x) { return full->forward(x); });
  want[2] = strided_rows(want[2], r, n, 3);
  want[3] = strided_rows(want[3], r, n, 3);
  want[4] = want[4].narrow(1, r * c, c);
  torch::manual_seed(21);
  ParallelSelfAttention attn(kC, kHeads, 8, tp);
  const auto got = attention_run(*attn, [&](const at::Tensor& x) { return attn->forward(x); });
  ASSERT_EQ(got.size(), 6u);
  // nn's fused core (routed GEMMs, fp32 scores) against the reference core here, and partial
  // sums over heads: fp32 rounding, as tests/kernels' attention check allows.
  const char* names[] = {"y", "dx", "qkv.weight grad", "qkv.bias grad", "proj.weight grad", "proj.bias grad"};
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], 1e-4, 1e-5, std::string("attention ") + names[i]);
}

// This rank's shard of a single-rank nn::Block parameter (or its gradient), by name.
at::Tensor block_shard(const std::string& name, const at::Tensor& full, int64_t r, int64_t n) {
  if (name.rfind("attn.qkv.", 0) == 0) return strided_rows(full, r, n, 3);
  if (name.rfind("mlp.fc.", 0) == 0) return strided_rows(full, r, n, 1);
  if (name == "attn.proj.weight" || name == "mlp.proj.weight") return full.narrow(1, r * full.size(1) / n, full.size(1) / n);
  return full;  // LayerNorms and the row-parallel biases are whole on every rank
}

void check_block(const CommPtr& tp) {
  const int64_t r = tp->rank(), n = tp->size();
  torch::manual_seed(31);
  nn::Block full(kC, kHeads, 8, 0.0);
  torch::manual_seed(31);
  ParallelBlock block(kC, kHeads, 8, tp);
  const auto want_params = full->named_parameters(), got_params = block->named_parameters();
  ASSERT_EQ(got_params.size(), want_params.size());
  for (size_t i = 0; i < got_params.size(); ++i) {
    const std::string name = want_params[i].key();
    ASSERT_EQ(got_params[i].key(), name);
    expect_equal(got_params[i].value(), block_shard(name, want_params[i].value(), r, n), "init of " + name);
    // shard_specs describes the same split as the hand-written block_shard.
    expect_equal(shard_of(want_params[i].value(), shard_specs(*block).at(name), r, n),
                 block_shard(name, want_params[i].value(), r, n), "shard_of " + name);
  }
  auto run = [](torch::nn::Module& m, const std::function<at::Tensor(const at::Tensor&)>& fn) {
    torch::manual_seed(32);
    const auto x = at::randn({2, 6, kC}).requires_grad_();
    const auto g = at::randn({2, 6, kC});
    const auto y = fn(x);
    (y * g).sum().backward();
    return std::make_pair(y.detach(), x.grad());
  };
  const auto want = run(*full, [&](const at::Tensor& x) { return full->forward(x); });
  const auto got = run(*block, [&](const at::Tensor& x) { return block->forward(x); });
  // As check_attention: nn's fused attention core vs the reference core, partial sums over ranks.
  expect_close(got.first, want.first, 1e-4, 1e-5, "block y");
  expect_close(got.second, want.second, 1e-4, 1e-5, "block dx");
  for (size_t i = 0; i < got_params.size(); ++i) {
    const std::string name = want_params[i].key();
    expect_close(got_params[i].value().grad(), block_shard(name, want_params[i].value().grad(), r, n), 1e-4, 1e-5,
                 "block grad of " + name);
  }
}

TEST(TensorParallelWorker, LayersMatchSingleRank) {
  XTRAIN_WORKER_ONLY();
  comm::CommOptions o;
  o.timeout_seconds = 30;
  auto c = comm::Communicator::create(comm::rank_info_from_env(), o);
  const Result want = reference(c->rank(), c->size());
  compare(tensor_parallel(c, /*gather=*/false), want, "split");
  compare(tensor_parallel(c, /*gather=*/true), want, "gather+scatter");
  // The init keeps this rank's slice of the single-rank init.
  torch::manual_seed(5);
  nn::Linear full(kIn, kHidden);
  torch::manual_seed(5);
  ColumnParallelLinear fc(kIn, kHidden, c);
  const int64_t h = kHidden / c->size();
  expect_equal(fc->weight, full->weight.narrow(0, c->rank() * h, h), "column init");
  EXPECT_THROW(ColumnParallelLinear(kIn, 15, c), UsageError);
  EXPECT_THROW(RowParallelLinear(15, kIn, c), UsageError);
  EXPECT_THROW(VocabParallelEmbedding(15, kDim, c), UsageError);
  compare_lm(lm_tensor_parallel(c), lm_reference(c->rank(), c->size()), "vocab-parallel");
  check_attention(c);
  check_block(c);
  EXPECT_THROW(ParallelSelfAttention(kC, 3, 8, c), UsageError);  // 2 ranks cannot split 3 heads
  c->barrier();
}

TEST(TensorParallel, TwoRanksMatchSingleRank) {
  testing::expect_workers_ok("TensorParallelWorker.LayersMatchSingleRank", 2);
}

TEST(TensorParallel, GroupOfOneIsPlainLinear) {
  for (bool gather : {false, true}) {
    const Result want = reference(0, 1), got = tensor_parallel(comm::Communicator::single(), gather);
    expect_equal(got.y, want.y, "y");
    expect_equal(got.dx, want.dx, "dx");
    expect_equal(got.fc_w, want.fc_w, "fc.weight grad");
    expect_equal(got.proj_w, want.proj_w, "proj.weight grad");
  }
}

TEST(TensorParallel, GroupOfOneVocabParallelIsCrossEntropy) {
  compare_lm(lm_tensor_parallel(comm::Communicator::single()), lm_reference(0, 1), "group of one");
}

TEST(TensorParallel, FourRanksMatchSingleRank) {
  testing::expect_workers_ok("TensorParallelWorker.LayersMatchSingleRank", 4);
}

TEST(TensorParallel, GroupOfOneAttentionIsCausalSelfAttention) {
  check_attention(comm::Communicator::single());
  ParallelSelfAttention attn(kC, kHeads, 8, comm::Communicator::single());
  nn::CausalSelfAttention full(kC, kHeads, 8, 0.0);
  std::vector<std::string> names, want;
  for (const auto& p : attn->named_parameters()) names.push_back(p.key());
  for (const auto& p : full->named_parameters()) want.push_back(p.key());
  EXPECT_EQ(names, want);
  EXPECT_THROW(ParallelSelfAttention(kC, kHeads, 8, comm::Communicator::single(), 0.1), UsageError);
}

TEST(TensorParallel, GroupOfOneBlockIsBlock) { check_block(comm::Communicator::single()); }

TEST(TensorParallel, ShardSpecsOfABlock) {
  ParallelBlock block(kC, kHeads, 8, comm::Communicator::single());
  const ShardSpec whole{}, rows{0, 1}, qkv{0, 3}, cols{1, 1};
  const std::map<std::string, ShardSpec> want = {
      {"ln1.weight", whole},      {"ln1.bias", whole},       {"attn.qkv.weight", qkv}, {"attn.qkv.bias", qkv},
      {"attn.proj.weight", cols}, {"attn.proj.bias", whole}, {"ln2.weight", whole},    {"ln2.bias", whole},
      {"mlp.fc.weight", rows},    {"mlp.fc.bias", rows},     {"mlp.proj.weight", cols}, {"mlp.proj.bias", whole}};
  EXPECT_EQ(shard_specs(*block), want);
  VocabParallelEmbedding wte(kVocab, kDim, comm::Communicator::single());
  EXPECT_EQ(shard_specs(*wte).at("weight"), rows);
}

TEST(TensorParallel, ShardAndUnshardRoundTrip) {
  const auto full = at::arange(24 * 6, at::kFloat).view({24, 6});
  // stride 3 over 2 ranks: blocks of 8 rows, 4 each: rank 1 holds rows 4-7, 12-15, 20-23.
  const auto r1 = shard_of(full, {0, 3}, 1, 2);
  ASSERT_EQ(r1.sizes(), (std::vector<int64_t>{12, 6}));
  const std::vector<int64_t> rows = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23};
  for (size_t i = 0; i < rows.size(); ++i) expect_equal(r1[i], full[rows[i]], "row " + std::to_string(i));
  for (const ShardSpec& spec : {ShardSpec{0, 1}, ShardSpec{0, 3}, ShardSpec{1, 1}, ShardSpec{1, 2}, ShardSpec{}}) {
    for (int64_t n : {1, 2, 3}) {
      if (spec.dim >= 0 && full.size(spec.dim) % (n * spec.stride) != 0) continue;
      std::vector<at::Tensor> shards;
      for (int64_t r = 0; r < n; ++r) shards.push_back(shard_of(full, spec, r, n));
      expect_equal(unshard(shards, spec, "t"), full, "dim " + std::to_string(spec.dim) + " stride " +
                                                         std::to_string(spec.stride) + " n " + std::to_string(n));
    }
  }
  EXPECT_THROW(shard_of(full, {1, 1}, 0, 4), UsageError);  // 6 columns in 4
  EXPECT_THROW(unshard({full, full + 1}, {}, "ln.weight"), UsageError);
}

TEST(TensorParallel, ParametersAreNamedAsLinear) {
  ColumnParallelLinear fc(kIn, kHidden, comm::Communicator::single());
  RowParallelLinear proj(kHidden, kIn, comm::Communicator::single());
  EXPECT_EQ(fc->named_parameters().size(), 2u);
  EXPECT_EQ(fc->named_parameters()["weight"].sizes(), (std::vector<int64_t>{kHidden, kIn}));
  EXPECT_EQ(proj->named_parameters()["bias"].sizes(), (std::vector<int64_t>{kIn}));
}

}  // namespace
}  // namespace xtrain::parallel::tensor::tensor_parallel_test
