// The KV-cache decoder (models/kv_cache.h) against the GPT's own full forward (the reference: the
// model without a cache, itself checked against PyTorch by tests/models/gpt_test.cpp), for dense and
// multi-scale attention: logits at every position, batched steps, and whole generations.
#include <ATen/ops/randint.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <vector>

#include "xtrain/models/builtin_entries.h"
#include "xtrain/models/generate.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/kv_cache.h"

namespace xtrain::models::kv_cache_test {
namespace {

// Small enough to be fast; windows {2, 4} so that positions up to 40 use three or four levels.
GPT tiny_gpt(const std::string& attention) {
  ModelOptions o;
  o.layers = 2, o.d_model = 32, o.heads = 4, o.seq_len = 40, o.vocab = 53;
  o.attention.type = attention;
  o.attention.windows = {2, 4};
  torch::manual_seed(7);
  GPT gpt(o);
  gpt->eval();
  return gpt;
}

std::vector<int64_t> random_tokens(int64_t n, int64_t V, uint64_t seed) {
  torch::manual_seed(seed);
  const auto t = at::randint(V, {n}, at::kLong);
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
}

// The full forward's last-position logits over the cropped context ending at token t.
at::Tensor reference_logits(GPT& gpt, const std::vector<int64_t>& tokens, int64_t t) {
  const int64_t T = gpt->options().seq_len;
  const int64_t begin = std::max<int64_t>(0, t + 1 - T);
  std::vector<int64_t> ctx(tokens.begin() + begin, tokens.begin() + t + 1);
  at::NoGradGuard no_grad;
  const auto idx = at::tensor(ctx, at::kLong).view({1, -1});
  return gpt->forward(idx)[0][-1];
}

// fp32, different summation orders (kernel vs. per-sequence GEMMs): agree to ~1e-6; 2e-5 leaves room.
void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& where) {
  const auto err = (got - want).abs();
  const double worst = err.max().item<double>();
  EXPECT_LT(worst, 2e-5) << where << ": largest error " << worst << " at vocab index " << err.argmax().item<int64_t>();
}

class KVCache : public ::testing::TestWithParam<std::string> {};

TEST_P(KVCache, LogitsEqualTheFullForwardAtEveryPositionAndPastTheContext) {
  auto gpt = tiny_gpt(GetParam());
  const auto tokens = random_tokens(52, 53, 1);  // 12 past seq_len: the cropped-context steps too
  auto decoder = make_gpt_decoder(gpt.ptr());
  auto state = decoder->start();
  const int64_t prompt = 5;
  auto logits = decoder->prefill(*state, std::vector<int64_t>(tokens.begin(), tokens.begin() + prompt));
  expect_close(logits, reference_logits(gpt, tokens, prompt - 1), "prefill");
  for (int64_t t = prompt; t < static_cast<int64_t>(tokens.size()); ++t) {
    logits = decoder->step({state.get()}, {tokens[t]})[0];
    expect_close(logits, reference_logits(gpt, tokens, t), "position " + std::to_string(t));
  }
}

TEST_P(KVCache, ABatchedStepEqualsEachSequenceAlone) {
  auto gpt = tiny_gpt(GetParam());
  auto decoder = make_gpt_decoder(gpt.ptr());
  const std::vector<int64_t> lengths = {1, 9, 17, 40};  // 40: full, recomputed inside the batch
  std::vector<std::vector<int64_t>> seqs;
  std::vector<std::unique_ptr<DecodeState>> states;
  std::vector<DecodeState*> ptrs;
  std::vector<int64_t> next;
  for (size_t i = 0; i < lengths.size(); ++i) {
    seqs.push_back(random_tokens(lengths[i] + 1, 53, 10 + i));
    states.push_back(decoder->start());
    decoder->prefill(*states.back(), std::vector<int64_t>(seqs[i].begin(), seqs[i].end() - 1));
    ptrs.push_back(states.back().get());
    next.push_back(seqs[i].back());
  }
  const auto batched = decoder->step(ptrs, next);
  ASSERT_EQ(batched.size(0), 4);
  for (size_t i = 0; i < lengths.size(); ++i) {
    expect_close(batched[i], reference_logits(gpt, seqs[i], lengths[i]), "sequence " + std::to_string(i));
  }
}

TEST_P(KVCache, GenerateEqualsTheRecomputingPathTokenForToken) {
  auto gpt = tiny_gpt(GetParam());
  const auto prompt = random_tokens(6, 53, 3);
  // Greedy (top_k 1) and sampled (temperature 0.9, top_k 20), past seq_len (6 + 50 > 40).
  for (int64_t top_k : {1, 20}) {
    const auto cached = generate(*gpt, prompt, 50, 0.9, top_k, 11);
    const auto recomputed = generate_recompute(*gpt, prompt, 50, 0.9, top_k, 11);
    EXPECT_EQ(cached, recomputed) << "top_k " << top_k;
  }
}

INSTANTIATE_TEST_SUITE_P(Attention, KVCache, ::testing::Values("dense", "multiscale"));

// The rule's ranges partition [0, t] into whole aligned segments, each level w or w + 1 segments
// long except where it reaches position 0 (checked from the definition, position by position).
TEST(MultiscaleRanges, PartitionZeroToTInWholeAlignedSegments) {
  for (int64_t w : {1, 2, 3, 8}) {
    for (int64_t t = 0; t < 300; ++t) {
      const auto ranges = multiscale_ranges(t, w);
      int64_t expect_end = t + 1, size = 1;
      for (const auto& r : ranges) {
        ASSERT_EQ(r.end, expect_end) << "t " << t << " w " << w;
        ASSERT_EQ(r.size, size);
        ASSERT_LT(r.start, r.end);
        ASSERT_EQ(r.start % r.size, 0);
        ASSERT_EQ((r.end - r.start) % r.size, 0);
        const int64_t count = (r.end - r.start) / r.size;
        if (r.start > 0) {
          EXPECT_TRUE(count == w || count == w + 1) << "t " << t << " w " << w << " count " << count;
        }
        expect_end = r.start, size *= 2;
      }
      ASSERT_EQ(expect_end, 0) << "t " << t << " w " << w;
    }
  }
}

TEST(KVCacheEntry, TheGptEntryOffersIncrementalDecoding) {
  auto gpt = tiny_gpt("dense");
  Model m{gpt.ptr(), nullptr, "lm", gpt->options()};
  const auto& entry = gpt_entry();
  ASSERT_TRUE(entry.incremental_decoder);
  auto decoder = entry.incremental_decoder(m, DecoderWeights{});
  EXPECT_EQ(decoder->max_context(), 40);
  EXPECT_EQ(decoder->vocab(), 53);
}

}  // namespace
}  // namespace xtrain::models::kv_cache_test
