// The ZeRO communication keys through the config and the engine, 2 ranks over Gloo:
// communication_data_type (each rank's gradient rounded to the wire dtype, summed, rounded again:
// against a float64 reference of exactly that, and unlike the fp32 path), reduce_scatter false
// (same parameters, all-reduces instead of reduce-scatters in the Communicator's counters),
// allgather_bucket_size and allgather_partitions (the gather's calls follow DeepSpeed's arithmetic,
// parameters unchanged), ignore_unused_parameters (false names the parameter on every rank), and
// load_from_fp32_weights (bf16: the saved master, or the bf16 weights widened).
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "support/mlp_loss.h"
#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"
#include "xtrain/zero/shard_io.h"
#include "xtrain/zero/shard_layout.h"

namespace xtrain::zero_comm_test {
namespace {

std::shared_ptr<comm::Communicator> connect() {
  comm::CommOptions o;
  o.timeout_seconds = 60;
  return comm::Communicator::create(comm::rank_info_from_env(), o);
}

// `zero` and `top` are extra JSON members of zero_optimization and of the top level.
config::Config make_config(int64_t world, const std::string& optimizer, const std::string& zero, const std::string& top) {
  const std::string text = c10::str(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, )",
                                    R"("zero_allow_untested_optimizer": true, "optimizer": )", optimizer,
                                    R"(, "zero_optimization": {)", zero, "}", top.empty() ? "" : ", ", top, "}");
  config::LoadOptions lo;
  lo.world_size = world;
  lo.quiet = true;
  return config::load_text(text, lo).config;
}

// ---- communication_data_type ----

constexpr int64_t kN = 64;  // two ranks x 32: one shard each, no padding

// Rank r's gradient of `w`: values in fp16's normal range that neither bf16 nor fp16 holds exactly.
at::Tensor rank_grad(int64_t r) {
  return ((at::arange(kN, at::kDouble) * 0.7311 + 1.37 * static_cast<double>(r)).sin() * 3.1 + 0.01 * (r + 1))
      .to(at::kFloat);
}

// One SGD step (lr 1) from w = 0 with loss sum(w * g_r): every rank's w is then minus the reduced
// gradient, exactly (fp32 parameters, no clipping, no loss scale).
at::Tensor reduced_gradient(const std::shared_ptr<comm::Communicator>& c, int stage, const std::string& zero_extra,
                            const std::string& dtype, comm::CommStats* step_stats = nullptr) {
  const std::string zero = c10::str(R"("stage": )", stage, zero_extra);
  const std::string top = dtype.empty() ? "" : c10::str(R"("communication_data_type": ")", dtype, R"(")");
  auto cfg = make_config(c->size(), R"({"type": "SGD", "params": {"lr": 1.0}})", zero, top);
  zero::NamedParams params{{"w", at::zeros({kN}, at::kFloat).requires_grad_(true)}};
  const at::Tensor g = rank_grad(c->rank());
  Engine e(params, [&](const data::Batch&) { return (params[0].second * g).sum(); }, cfg, c);
  const auto before = c->stats();
  e.backward(e.forward(data::Batch{}));
  EXPECT_TRUE(e.step());
  if (step_stats) {
    const auto after = c->stats();
    step_stats->sent_bytes = after.sent_bytes - before.sent_bytes;
  }
  return -params[0].second.detach().clone();
}

// The mean over ranks when each gradient is rounded to `dtype`, summed exactly and the sum rounded
// to `dtype` (what the wire carries), in float64.
at::Tensor rounded_mean(int64_t world, at::ScalarType dtype) {
  at::Tensor sum = at::zeros({kN}, at::kDouble);
  for (int64_t r = 0; r < world; ++r) sum += rank_grad(r).to(dtype).to(at::kDouble);
  return sum.to(dtype).to(at::kDouble) / static_cast<double>(world);
}

void check_communication_dtype(const std::shared_ptr<comm::Communicator>& c, int stage, const std::string& extra) {
  const int64_t W = c->size();
  const std::string what = c10::str("stage ", stage, extra);
  comm::CommStats fp32_stats, wire_stats;
  const auto fp32 = reduced_gradient(c, stage, extra, "", &fp32_stats);
  // fp32: the plain mean, within fp32 rounding of a two-term sum.
  testing::expect_close(fp32.to(at::kDouble), rounded_mean(W, at::kDouble), 1e-7, 1e-7, "fp32 mean, " + what);
  const bool all_reduce = stage == 0 || extra.find("false") != std::string::npos;
  for (const auto& [name, dtype] : {std::pair<std::string, at::ScalarType>{"bf16", at::kBFloat16}, {"fp16", at::kHalf}}) {
    const auto got = reduced_gradient(c, stage, extra, name, &wire_stats);
    const auto expect = rounded_mean(W, dtype);
    // The result is a value of `dtype` divided by W (exact for W = 2); a quarter of the dtype's
    // spacing (2^-8 bf16, 2^-11 fp16, relative) tells "rounded as the wire rounds" from anything else.
    const double spacing = dtype == at::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
    testing::expect_close(got.to(at::kDouble), expect, spacing / 4, 1e-6, name + " on the wire, " + what);
    // Dropping the key gives the fp32 result: it differs by up to half a spacing.
    const double differs = (got - fp32).abs().max().item<double>();
    EXPECT_GT(differs, spacing / 8) << name << " reduction equals the fp32 path, " << what;
    // The gradient's bytes on the wire halve: kN fp32 elements, all-reduced (2(W-1)/W of the buffer
    // per rank) or reduce-scattered ((W-1)/W).
    const int64_t fp32_wire = kN * 4 * (W - 1) / W * (all_reduce ? 2 : 1);
    EXPECT_EQ(fp32_stats.sent_bytes - wire_stats.sent_bytes, fp32_wire / 2) << name << ", " << what;
  }
}

TEST(ZeroCommWorker, CommunicationDataType) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  for (int stage : {0, 1, 2, 3}) check_communication_dtype(c, stage, "");
  for (int stage : {1, 2, 3}) check_communication_dtype(c, stage, R"(, "reduce_scatter": false)");
  c->barrier();
}

TEST(ZeroComm, CommunicationDataTypeRoundsTheSumTwoRanks) {
  testing::expect_workers_ok("ZeroCommWorker.CommunicationDataType", 2);
}

// ---- an MLP trained a few steps: reduce_scatter, allgather_*, ignore_unused_parameters ----

struct Mlp {
  zero::NamedParams params;
  bool use_extra = false;  // "extra" gets a gradient only when the loss uses it
  at::Tensor loss(const data::Batch& b) const {
    auto h = at::tanh(at::linear(b.input, params[0].second, params[1].second));
    auto out = (at::linear(h, params[2].second, params[3].second).to(at::kFloat) - b.target).pow(2).mean();
    return use_extra ? out + params[4].second.sum() * 1e-3 : out;
  }
};

Mlp make_mlp() {
  Mlp m;
  m.params = testing::make_mlp_loss(
                 {{"fc1.weight", {24, 8}}, {"fc1.bias", {24}}, {"fc2.weight", {5, 24}}, {"fc2.bias", {5}}, {"extra", {6}}})
                 .params;
  return m;
}

data::Batch batch(int64_t first, int64_t count) { return testing::smooth_batch(first, count, 8, 5); }

constexpr int64_t kSteps = 4;

struct Trained {
  at::Tensor params;      // flat, after kSteps
  comm::CommStats steps;  // the collectives of the kSteps steps (not the engine's construction)
  int64_t numel = 0;      // the padded flat layout
};

Trained train(const std::shared_ptr<comm::Communicator>& c, int stage, const std::string& zero_extra,
              bool use_extra = true) {
  auto cfg = make_config(c->size(), R"({"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}})",
                         c10::str(R"("stage": )", stage, R"(, "reduce_bucket_size": 100000)", zero_extra), "");
  Mlp m = make_mlp();
  m.use_extra = use_extra;
  Engine e(m.params, [&m](const data::Batch& b) { return m.loss(b); }, cfg, c);
  const auto before = c->stats();
  for (int64_t s = 0; s < kSteps; ++s) {
    e.backward(e.forward(batch((s * c->size() + c->rank()) * 2, 2)));
    e.step();
  }
  Trained t;
  const auto after = c->stats();
  t.steps.all_reduces = after.all_reduces - before.all_reduces;
  t.steps.reduce_scatters = after.reduce_scatters - before.reduce_scatters;
  t.steps.all_gathers = after.all_gathers - before.all_gathers;
  t.steps.broadcasts = after.broadcasts - before.broadcasts;
  std::vector<at::Tensor> flat;
  for (const auto& [name, p] : m.params) flat.push_back(p.detach().reshape({-1}));
  t.params = at::cat(flat);
  t.numel = e.layout().numel;
  return t;
}

TEST(ZeroCommWorker, ReduceScatterFalse) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  for (int stage : {1, 2, 3}) {
    const auto rs = train(c, stage, "");
    const auto ar = train(c, stage, R"(, "reduce_scatter": false)");
    // Two ranks: a + b is the same float whichever collective adds it.
    testing::expect_equal(ar.params, rs.params, c10::str("stage ", stage, " parameters, all-reduce vs reduce-scatter"));
    EXPECT_GT(rs.steps.reduce_scatters, 0) << stage;
    EXPECT_EQ(ar.steps.reduce_scatters, 0) << stage;
    EXPECT_EQ(ar.steps.all_reduces - rs.steps.all_reduces, rs.steps.reduce_scatters) << stage;
  }
  c->barrier();
}

TEST(ZeroComm, ReduceScatterFalseAllReducesTwoRanks) {
  testing::expect_workers_ok("ZeroCommWorker.ReduceScatterFalse", 2);
}

TEST(ZeroCommWorker, AllgatherBuckets) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  const int64_t W = c->size();
  for (int stage : {1, 2}) {
    const auto whole = train(c, stage, "");
    EXPECT_EQ(whole.steps.all_gathers, kSteps) << "one unit, one gather per step, stage " << stage;
    // 347 parameters padded to 352: DeepSpeed cuts max(1, 352 / bucket) pieces.
    for (int64_t bucket : {40, 100, 352, 4000}) {
      const auto t = train(c, stage, c10::str(R"(, "allgather_bucket_size": )", bucket));
      const int64_t pieces = std::max<int64_t>(1, t.numel / bucket);
      EXPECT_EQ(t.steps.all_gathers, kSteps * pieces) << "stage " << stage << " bucket " << bucket;
      testing::expect_equal(t.params, whole.params, c10::str("stage ", stage, " bucket ", bucket));
      const auto b = train(c, stage, c10::str(R"(, "allgather_bucket_size": )", bucket, R"(, "allgather_partitions": false)"));
      EXPECT_EQ(b.steps.all_gathers, 0) << "stage " << stage;
      EXPECT_EQ(b.steps.broadcasts, kSteps * pieces * W) << "one broadcast per rank and piece, stage " << stage;
      testing::expect_equal(b.params, whole.params, c10::str("broadcasts, stage ", stage, " bucket ", bucket));
    }
  }
  c->barrier();
}

TEST(ZeroComm, AllgatherBucketSizeSetsTheGatherCalls) {
  testing::expect_workers_ok("ZeroCommWorker.AllgatherBuckets", 2);
}

TEST(ZeroComm, AllgatherPartitionsFalseBroadcasts) {
  // The same worker checks both keys; this name is the one the key table cites for allgather_partitions.
  testing::expect_workers_ok("ZeroCommWorker.AllgatherBuckets", 2);
}

TEST(ZeroComm, AllgatherPiecesFollowDeepSpeed) {
  using Pieces = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(zero::allgather_pieces(176, 2, 500000000), (Pieces{{0, 176}}));
  EXPECT_EQ(zero::allgather_pieces(176, 2, 40), (Pieces{{0, 22}, {22, 22}, {44, 22}, {66, 22}, {88, 22}, {110, 22},
                                                        {132, 22}, {154, 22}}));  // 352 / 40 = 8 pieces
  // 300 / 70 = 4 pieces of 100 / 4 = 25 elements, made even: 24; the last takes the rest.
  EXPECT_EQ(zero::allgather_pieces(100, 3, 70), (Pieces{{0, 24}, {24, 24}, {48, 24}, {72, 28}}));
  EXPECT_EQ(zero::allgather_pieces(4, 4, 2), (Pieces{{0, 2}, {2, 2}}));  // at least 2 elements a piece
}

TEST(ZeroCommWorker, IgnoreUnusedParameters) {
  XTRAIN_WORKER_ONLY();
  auto c = connect();
  for (int stage : {1, 2}) {
    const std::string strict = R"(, "ignore_unused_parameters": false)";
    std::string message;
    try {
      train(c, stage, strict, /*use_extra=*/false);
    } catch (const UsageError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("got no gradient"), std::string::npos) << stage << ": " << message;
    EXPECT_NE(message.find("extra"), std::string::npos) << stage << ": " << message;
    EXPECT_NE(message.find("zero_optimization.ignore_unused_parameters"), std::string::npos) << message;
    // Used on rank 1 only: both ranks fail together (no rank is left waiting in a collective).
    message.clear();
    try {
      train(c, stage, strict, /*use_extra=*/c->rank() == 1);
    } catch (const UsageError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find(c->rank() == 0 ? "extra" : "on another rank"), std::string::npos) << stage << ": " << message;
    EXPECT_NO_THROW(train(c, stage, "", /*use_extra=*/false)) << "the default ignores it, stage " << stage;
    EXPECT_NO_THROW(train(c, stage, strict, /*use_extra=*/true)) << "every parameter used, stage " << stage;
  }
  c->barrier();
}

TEST(ZeroComm, IgnoreUnusedParametersFalseNamesTheParameter) {
  testing::expect_workers_ok("ZeroCommWorker.IgnoreUnusedParameters", 2);
}

// ---- load_from_fp32_weights (one rank; the strategies' load is the same at any world size) ----

at::Tensor saved_master(const std::string& root) {
  std::vector<at::Tensor> flat;
  for (const auto& [name, t] : zero::consolidate(checkpoint::CheckpointReader(root), false).model) {
    flat.push_back(t.reshape({-1}));
  }
  return at::cat(flat);
}

void save(Engine& e, const std::string& root) {
  checkpoint::CheckpointWriter w(root, "t", 0);
  e.save_checkpoint(w);
  w.finish_rank();
  w.commit("{}", 1);
}

TEST(ZeroComm, LoadFromFp32WeightsFalseRebuildsTheMaster) {
  auto c = comm::Communicator::single();
  for (int stage : {0, 1, 2, 3}) {
    const auto root = testing::temp_dir(c10::str("fp32_weights_", stage));
    const std::string adam = R"({"type": "AdamW", "params": {"lr": 0.003}})";
    const std::string bf16 = R"("bf16": {"enabled": true})";
    at::Tensor master;
    {
      Mlp m = make_mlp();
      m.use_extra = true;
      Engine e(m.params, [&m](const data::Batch& b) { return m.loss(b); },
               make_config(1, adam, c10::str(R"("stage": )", stage), bf16), c);
      for (int64_t s = 0; s < 3; ++s) {
        e.backward(e.forward(batch(s * 2, 2)));
        e.step();
      }
      save(e, root + "/a");
      master = saved_master(root + "/a");
    }
    const auto widened = master.to(at::kBFloat16).to(at::kFloat);
    ASSERT_GT((master - widened).abs().max().item<double>(), 0) << "the master must hold more than bf16 does";
    for (bool from_fp32 : {true, false}) {
      Mlp m = make_mlp();
      const auto zero = c10::str(R"("stage": )", stage, R"(, "load_from_fp32_weights": )", from_fp32 ? "true" : "false");
      Engine e(m.params, [&m](const data::Batch& b) { return m.loss(b); }, make_config(1, adam, zero, bf16), c);
      e.load_checkpoint(checkpoint::CheckpointReader(root + "/a"));
      const auto out = c10::str(root, "/b", from_fp32);
      save(e, out);
      testing::expect_equal(saved_master(out), from_fp32 ? master : widened,
                            c10::str("stage ", stage, from_fp32 ? ": the saved fp32 master" : ": the bf16 weights widened"));
    }
  }
}

}  // namespace
}  // namespace xtrain::zero_comm_test
