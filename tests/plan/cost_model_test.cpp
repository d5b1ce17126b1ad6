// plan/: the scaling model against closed forms written out here — GPT-2's published parameter
// counts, the ZeRO paper's model-state bytes (16Ψ, 4Ψ + 12Ψ/Nd, 2Ψ + 14Ψ/Nd, 16Ψ/Nd), Korthikanti
// et al.'s activation bytes sbh(34 + 5as/h), alpha-beta ring times computed by hand, the pipeline
// bubble (p-1)/(m+p-1) — and the recommendation on cases whose answer follows from the arithmetic.
#include <gtest/gtest.h>

#include "support/errors.h"
#include "xtrain/plan/cost_model.h"
#include "xtrain/plan/inputs.h"

namespace xtrain::plan::cost_model_test {
namespace {

using testing::expect_usage_error;

ModelShape gpt2_small() { return {12, 768, 12, 50257, 1024, true}; }
ModelShape default_gpt() { return {4, 256, 4, 256, 256, true}; }

Cluster cluster(int64_t nodes, int64_t gpn, double inter_bps, double intra_bps = 1e11) {
  Cluster c;
  c.nodes = nodes;
  c.gpus_per_node = gpn;
  c.inter = {inter_bps, 50e-6};
  c.intra = {intra_bps, 5e-6};
  c.memory_bytes = 80e9;
  c.flops_per_s = 1e11;
  return c;
}

Training fp32(int64_t micro, int64_t batch, int64_t stage = 0) {
  Training t;
  t.micro_batch = micro;
  t.train_batch = batch;
  t.zero_stage = stage;
  t.param_bytes = t.comm_bytes = 4;
  return t;
}

const Estimate& find(const Plan& p, const std::string& name) {
  for (const auto& e : p.estimates) {
    if (e.layout.name == name) return e;
  }
  throw std::runtime_error("no layout " + name);
}

TEST(PlanModel, ParameterCountMatchesGpt2) {
  // Hugging Face GPT2LMHeadModel.num_parameters(): gpt2 124,439,808; gpt2-medium 354,823,168 (tied head).
  EXPECT_EQ(parameter_count(gpt2_small()), 124439808);
  EXPECT_EQ(parameter_count({24, 1024, 16, 50257, 1024, true}), 354823168);
  ModelShape untied = gpt2_small();
  untied.tie_embeddings = false;
  EXPECT_EQ(parameter_count(untied), 124439808 + 50257 * 768);
}

TEST(PlanModel, ModelStatesAreTheZeroPaperBytes) {
  // Mixed-precision Adam: 2 + 2 + 12 bytes per parameter; stage s partitions over Nd = 64.
  const ModelShape m{32, 4096, 32, 32000, 2048, true};
  const double psi = double(parameter_count(m)), nd = 64;
  Cluster c = cluster(8, 8, 5e10, 9e11);
  Training t = fp32(1, 64);
  t.param_bytes = t.comm_bytes = 2;
  const double expected[4] = {16 * psi, 4 * psi + 12 * psi / nd, 2 * psi + 14 * psi / nd, 16 * psi / nd};
  for (int64_t stage = 0; stage <= 3; ++stage) {
    const Estimate e = estimate({"z", 64, 1, 1, stage}, m, c, t);
    const Memory& mm = e.memory;
    EXPECT_NEAR(mm.params + mm.grads + mm.master + mm.optimizer, expected[stage], 16.0) << "stage " << stage;  // floor of Ψ/Nd
  }
}

TEST(PlanModel, ActivationsAreKorthikantiBytes) {
  // 16-bit, no tensor parallelism: sbh(34 + 5as/h) per layer, plus fp32 logits and their gradient.
  const ModelShape m = gpt2_small();
  Training t = fp32(1, 1);
  t.param_bytes = t.comm_bytes = 2;
  const double s = 1024, b = 1, h = 768, a = 12, V = 50257, L = 12;
  const double logits = s * b * V * 8;
  const Estimate e = estimate({"DP", 1, 1, 1, 0}, m, cluster(1, 1, 0), t);
  EXPECT_NEAR(e.memory.activations, L * s * b * h * (34 + 5 * a * s / h) + logits, 1.0);
  t.activation_checkpointing = true;  // each layer's 2-byte input, one layer recomputed at a time
  const Estimate ck = estimate({"DP", 1, 1, 1, 0}, m, cluster(1, 1, 0), t);
  EXPECT_NEAR(ck.memory.activations, L * 2 * s * b * h + s * b * h * (34 + 5 * a * s / h) + logits, 1.0);
}

TEST(PlanModel, RingCollectivesByHand) {
  const Link link{1e9, 1e-5};  // 1 GB/s, 10 us
  EXPECT_DOUBLE_EQ(all_reduce_s(1e9, 4, link), 2 * 0.75 + 6e-5);
  EXPECT_DOUBLE_EQ(reduce_scatter_s(1e9, 4, link), 0.75 + 3e-5);
  EXPECT_DOUBLE_EQ(all_gather_s(1e9, 4, link), 0.75 + 3e-5);
  EXPECT_DOUBLE_EQ(send_s(5e8, link), 0.5 + 1e-5);
  EXPECT_EQ(all_reduce_s(1e9, 1, link), 0.0);
}

TEST(PlanModel, DataParallelStepByHand) {
  // 4 nodes x 1 rank at 10 Gbit/s (1.25e9 B/s), alpha 50 us, 1e11 FLOP/s, fp32, micro 16 x 4 ranks.
  const ModelShape m = default_gpt();
  const double N = double(parameter_count(m)), tokens = 16 * 256, B = 1.25e9, alpha = 50e-6;
  const Cluster c = cluster(4, 1, B);
  const double compute = 6 * N * tokens / 1e11;
  const double ar = 2 * 3.0 / 4 * 4 * N / B + 2 * 3 * alpha, rs = 3.0 / 4 * 4 * N / B + 3 * alpha;
  Training t = fp32(16, 64);
  Estimate e = estimate({"DP", 4, 1, 1, 0}, m, c, t);
  EXPECT_EQ(e.grad_accum, 1);
  EXPECT_NEAR(e.time.compute, compute, 1e-12);
  EXPECT_NEAR(e.time.dp_comm, ar, 1e-12);
  EXPECT_NEAR(e.time.total(), compute + ar, 1e-12);
  EXPECT_NEAR(e.tokens_per_s, 64 * 256 / (compute + ar), 1e-6);
  t.overlap_comm = true;  // the all-reduce (16 ms) fits in backward (2/3 of 0.8 s): half of it hidden
  t.overlap_fraction = 0.5;
  EXPECT_NEAR(estimate({"DP", 4, 1, 1, 0}, m, c, t).time.dp_exposed, 0.5 * ar, 1e-12);
  // ZeRO-2 at 2 micro-batches per step: a reduce-scatter per micro-batch, one parameter all-gather.
  const Estimate z2 = estimate({"ZeRO-2", 4, 1, 1, 2}, m, c, fp32(16, 128, 2));
  EXPECT_NEAR(z2.time.dp_comm, 2 * rs + rs, 1e-12);
  EXPECT_NEAR(z2.time.compute, 2 * compute, 1e-12);
  // ZeRO-3: reduce-scatter plus two all-gathers per micro-batch.
  EXPECT_NEAR(estimate({"ZeRO-3", 4, 1, 1, 3}, m, c, fp32(16, 64, 3)).time.dp_comm, 3 * rs, 1e-12);
  // bf16 on the wire halves the gradient bytes of the all-reduce.
  Training wire = fp32(16, 64);
  wire.comm_bytes = 2;
  EXPECT_NEAR(estimate({"DP", 4, 1, 1, 0}, m, c, wire).time.dp_comm, 2 * 3.0 / 4 * 2 * N / B + 6 * alpha, 1e-12);
}

TEST(PlanModel, PipelineBubbleAndTensorParallelTraffic) {
  const ModelShape m = default_gpt();
  const Cluster c = cluster(1, 4, 0);  // one node: every group on the intra-node link
  const Estimate pp = estimate({"PP x DP", 2, 1, 2, 1}, m, c, fp32(4, 64, 1));
  ASSERT_EQ(pp.grad_accum, 8);  // m = 64 / (4 x dp 2)
  EXPECT_NEAR(pp.time.bubble / (pp.time.compute + pp.time.bubble), 1.0 / (8 + 2 - 1), 1e-12);
  const double act = 4.0 * 256 * 256 * 4;  // b·s·h fp32
  EXPECT_NEAR(pp.time.pp_comm, 2 * (8 + 1) * (5e-6 + act / 1e11), 1e-12);

  const Cluster two = cluster(1, 2, 0);
  const Estimate tp = estimate({"TP x DP", 1, 2, 1, 0}, m, two, fp32(4, 8));
  ASSERT_EQ(tp.grad_accum, 2);
  // 4 all-reduces per layer per micro-batch, 4 layers, 2 micro-batches, ring of 2 on the intra link.
  EXPECT_NEAR(tp.time.tp_comm, 2 * 4 * 4 * (2 * 0.5 * act / 1e11 + 2 * 5e-6), 1e-12);
  EXPECT_EQ(tp.time.dp_comm, 0.0);
  EXPECT_NEAR(tp.time.compute, 2 * 6 * double(parameter_count(m)) * 4 * 256 / (2 * 1e11), 1e-12);
}

TEST(PlanModel, RecommendsTheFastestLayoutThatFits) {
  const ModelShape m = gpt2_small();
  const double psi = double(parameter_count(m));
  Training t = fp32(1, 8);  // 4 ranks: 2 micro-batches per step
  t.comm_bytes = 2;         // bf16 gradients on the wire: DP moves less than ZeRO-1's fp32 gather
  t.activation_checkpointing = true;
  Cluster c = cluster(4, 1, 1e11);
  EXPECT_EQ(make_plan(m, c, t).estimates[make_plan(m, c, t).recommended].layout.name, "DP");
  // fp32 model states: DP 16Ψ, ZeRO-1 8Ψ + 8Ψ/4; activations ~0.63 GB sit inside the margin.
  c.memory_bytes = 12 * psi + 0.8e9;
  Plan p = make_plan(m, c, t);
  EXPECT_FALSE(find(p, "DP").fits);
  ASSERT_GE(p.recommended, 0);
  EXPECT_EQ(p.estimates[p.recommended].layout.name, "ZeRO-1");
  c.memory_bytes = 1e6;
  EXPECT_EQ(make_plan(m, c, t).recommended, -1);
  // Slow links between nodes, fast inside: TP inside a node cuts the gradient bytes that cross.
  // 3 layers: no pipeline degree divides both layers and ranks.
  const ModelShape three{3, 768, 12, 50257, 1024, true};
  Cluster two_by_two = cluster(2, 2, 1.25e8, 1e11);
  p = make_plan(three, two_by_two, fp32(1, 8));
  EXPECT_FALSE(find(p, "PP x DP").possible);
  ASSERT_GE(p.recommended, 0);
  EXPECT_EQ(p.estimates[p.recommended].layout.name, "TP x DP");
  EXPECT_EQ(find(p, "TP x DP").layout.tp, 2);
}

TEST(PlanModel, ImpossibleInputsAreNamed) {
  const ModelShape m = default_gpt();  // 4 heads, 4 layers
  const Cluster c = cluster(2, 4, 1e9);
  EXPECT_NE(expect_usage_error([&] { make_plan(m, c, fp32(1, 64), 3, 0); }).find("--tp among the divisors of 4"),
            std::string::npos);
  EXPECT_NE(expect_usage_error([&] { make_plan(m, c, fp32(1, 64), 0, 3); }).find("--pp among the divisors of 4"),
            std::string::npos);
  const std::string msg = expect_usage_error([&] { make_plan(m, cluster(2, 3, 1e9), fp32(1, 64), 2, 2); });
  EXPECT_NE(msg.find("the cluster has 6"), std::string::npos) << msg;
  const Estimate few = estimate({"DP", 8, 1, 1, 0}, m, c, fp32(1, 4));
  EXPECT_FALSE(few.possible);
  EXPECT_NE(few.why_not.find("more ranks than samples"), std::string::npos) << few.why_not;
}

TEST(PlanInputs, UnitsAreExplicit) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gbit/s", "--inter-bw"), 5e10);
  EXPECT_DOUBLE_EQ(parse_bandwidth("10gbit", "--inter-bw"), 1.25e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("900GB/s", "--intra-bw"), 9e11);
  EXPECT_NE(expect_usage_error([] { parse_bandwidth("400", "--inter-bw"); }).find("--inter-bw 400: no unit"),
            std::string::npos);
  EXPECT_NE(expect_usage_error([] { parse_bandwidth("400Gb/s", "--inter-bw"); }).find("unknown unit 'Gb/s'"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(parse_bytes("80GiB", "--memory-per-gpu"), 80.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_bytes("80GB", "--memory-per-gpu"), 80e9);
  EXPECT_DOUBLE_EQ(parse_seconds("5us", "--inter-alpha"), 5e-6);
  EXPECT_DOUBLE_EQ(parse_seconds("0", "--inter-alpha"), 0.0);
  EXPECT_DOUBLE_EQ(parse_flops("312T", "--flops-per-gpu"), 3.12e14);
  EXPECT_DOUBLE_EQ(parse_flops("1.5e12", "--flops-per-gpu"), 1.5e12);
  EXPECT_NE(expect_usage_error([] { preset_overrides("8b"); }).find("gpt2-small"), std::string::npos);
}

}  // namespace
}  // namespace xtrain::plan::cost_model_test
