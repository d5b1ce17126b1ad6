// PipelineGPT against the whole GPT built from the same seed. Single process: every stage's
// parameter names are the whole model's for the blocks it owns (p = 1, 2, 4, tied and untied),
// the stages share the whole model's modules and free the rest once it is dropped, and stages
// chained in one process compute the whole model's logits and loss (GPT and a TensorParallelGPT of
// one rank). Over Gloo, 2 and 4 ranks (one stage each, the pipeline group = all ranks) train 3 SGD
// steps with GPipe and 1F1B, m = 4 micro-batches, fp32, no dropout, all-reducing the tied wte
// gradient between the first and the last stage: the last stage's losses and every stage's
// parameters (by name) equal one process training GPT on the whole batch. The executor's backward
// hooks run once per micro-batch around each backward, `last` on the final one only. 4 ranks as
// tensor-parallel pairs x 2 stages of a TensorParallelGPT also train like GPT.
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "support/fixtures.h"
#include "support/multiprocess.h"
#include "xtrain/base/error.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/models/gpt.h"
#include "xtrain/models/gpt_pipeline.h"
#include "xtrain/models/gpt_tensor_parallel.h"
#include "xtrain/parallel/pipeline/partition.h"
#include "xtrain/parallel/pipeline/pipeline_executor.h"
#include "xtrain/parallel/tensor/shard_spec.h"

namespace xtrain::models::gpt_pipeline_test {
namespace {

using parallel::pipeline::BackwardHooks;
using parallel::pipeline::PipelineExecutor;
using parallel::pipeline::ScheduleKind;
using testing::expect_close;

constexpr int kLayers = 4, kMicro = 4, kRows = 8, kSteps = 3;
constexpr int64_t kT = 16, kVocab = 64;
constexpr double kLr = 0.5;  // large enough that every weight moves well beyond fp32 rounding

ModelOptions options(bool tied) {
  ModelOptions o;
  o.layers = kLayers;
  o.d_model = 32;
  o.heads = 2;
  o.seq_len = kT;
  o.vocab = kVocab;
  o.tie_embeddings = tied;
  return o;
}

GPT whole_gpt(bool tied) {
  torch::manual_seed(7);
  return GPT(options(tied));
}

// Input ids and next-token targets [kRows, kT] for one step.
std::pair<at::Tensor, at::Tensor> batch(int step) {
  torch::manual_seed(100 + step);
  const auto t = at::randint(0, kVocab, {kRows, kT + 1}, at::kLong);
  return {t.narrow(1, 0, kT).contiguous(), t.narrow(1, 1, kT).contiguous()};
}

std::vector<std::string> names(const torch::nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& p : m.named_parameters()) out.push_back(p.key());
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The rule of gpt_pipeline.h written out: which of the whole model's names stage s owns.
std::vector<std::string> expected_names(const std::vector<std::string>& whole, const std::vector<int>& bounds, int s,
                                        bool tied) {
  const int p = static_cast<int>(bounds.size()) - 1;
  const bool first = s == 0, last = s == p - 1;
  std::vector<std::string> out;
  for (const auto& n : whole) {
    bool own = (starts_with(n, "wte.") && (first || (last && tied))) || (starts_with(n, "wpe.") && first) ||
               ((starts_with(n, "ln_f.") || starts_with(n, "lm_head.")) && last);
    for (int i = bounds[s]; i < bounds[s + 1]; ++i) own = own || starts_with(n, "blocks." + std::to_string(i) + ".");
    if (own) out.push_back(n);
  }
  return out;
}

TEST(PipelineGpt, StageNamesAreTheWholeModelsNames) {
  for (const bool tied : {true, false}) {
    auto whole = whole_gpt(tied);
    const auto all = whole->named_parameters();
    const auto whole_names = names(*whole);
    for (const int p : {1, 2, 4}) {
      std::set<std::string> seen;
      for (int s = 0; s < p; ++s) {
        PipelineGPT stage(whole.ptr(), s, p, "uniform");
        const std::string what =
            "tied " + std::to_string(tied) + " p " + std::to_string(p) + " stage " + std::to_string(s);
        EXPECT_EQ(stage->layer_bounds(), parallel::pipeline::partition_uniform(kLayers, p)) << what;
        EXPECT_EQ(names(*stage), expected_names(whole_names, stage->layer_bounds(), s, tied)) << what;
        for (const auto& q : stage->named_parameters()) {
          EXPECT_TRUE(q.value().is_same(all[q.key()])) << what << ": " << q.key() << " is a copy";
          seen.insert(q.key());
        }
        const bool has_wte = stage->named_parameters().find("wte.weight") != nullptr;
        EXPECT_EQ(has_wte, s == 0 || (tied && s == p - 1)) << what;
        const bool tied_here = tied && p > 1 && (s == 0 || s == p - 1);
        const std::vector<std::string> want_tied = tied_here ? std::vector<std::string>{"wte.weight"}
                                                             : std::vector<std::string>{};
        EXPECT_EQ(stage->tied_parameters(), want_tied) << what;
        EXPECT_EQ(stage->is_first(), s == 0);
        EXPECT_EQ(stage->is_last(), s == p - 1);
      }
      EXPECT_EQ(seen, std::set<std::string>(whole_names.begin(), whole_names.end())) << "p " << p;
    }
  }
}

TEST(PipelineGpt, ParametersPartitionBalancesBlocks) {
  auto whole = whole_gpt(true);
  PipelineGPT stage(whole.ptr(), 1, 2, "parameters");
  EXPECT_EQ(stage->layer_bounds(), (std::vector<int>{0, 2, 4}));  // equal blocks: an even split
  EXPECT_EQ(stage->routed_units().size(), 2u);
  EXPECT_EQ(stage->routed_units()[0].get(), whole->blocks[2].get());
}

TEST(PipelineGpt, StageKeepsOnlyItsModules) {
  std::weak_ptr<torch::nn::Module> block0, block3, ln_f, wte, wpe;
  PipelineGPT last{nullptr};
  {
    auto whole = whole_gpt(true);
    block0 = whole->blocks[0];
    block3 = whole->blocks[3];
    ln_f = whole->ln_f.ptr();
    wte = whole->wte.ptr();
    wpe = whole->wpe.ptr();
    last = PipelineGPT(whole.ptr(), 1, 2, "uniform");
  }
  EXPECT_TRUE(block0.expired());
  EXPECT_TRUE(wpe.expired());
  EXPECT_FALSE(block3.expired());
  EXPECT_FALSE(ln_f.expired());
  EXPECT_FALSE(wte.expired());  // the tied head
}

// Runs stages 0..p-1 in sequence (one process holds them all).
at::Tensor chained(std::vector<PipelineGPT>& stages, const at::Tensor& idx) {
  at::Tensor x = idx;
  for (auto& s : stages) x = s->forward(x);
  return x;
}

TEST(PipelineGpt, ChainedStagesAreTheWholeModel) {
  const auto [x, y] = batch(0);
  for (const bool tied : {true, false}) {
    auto whole = whole_gpt(tied);
    const auto want = whole->forward(x);
    const auto want_loss = at::cross_entropy_loss(want.reshape({-1, kVocab}), y.reshape({-1}));
    for (const int p : {1, 2, 4}) {
      std::vector<PipelineGPT> stages;
      for (int s = 0; s < p; ++s) stages.emplace_back(whole.ptr(), s, p, "parameters");
      const auto got = chained(stages, x);
      const std::string what = "tied " + std::to_string(tied) + " p " + std::to_string(p);
      // The same kernels on the same inputs: bit-identical.
      testing::expect_equal(got, want, what + " logits");
      testing::expect_equal(stages.back()->loss(got, y), want_loss, what + " loss");
    }
  }
}

TEST(PipelineGpt, ChainedStagesAreTheTensorParallelModel) {
  const auto [x, y] = batch(0);
  torch::manual_seed(7);
  TensorParallelGPT whole(options(true), comm::Communicator::single());
  const auto want = whole->forward(x);
  const auto want_loss = whole->loss(want, y);
  for (const int p : {1, 2, 4}) {
    std::vector<PipelineGPT> stages;
    for (int s = 0; s < p; ++s) stages.emplace_back(whole.ptr(), s, p, "uniform");
    const auto got = chained(stages, x);
    testing::expect_equal(got, want, "p " + std::to_string(p) + " logits");
    testing::expect_equal(stages.back()->loss(got, y), want_loss, "p " + std::to_string(p) + " loss");
    EXPECT_EQ(names(*stages.front()).front(), "wte.weight");
  }
}

TEST(PipelineGpt, BadStagesAreUsageErrors) {
  auto whole = whole_gpt(true);
  EXPECT_THROW(PipelineGPT(whole.ptr(), 0, kLayers + 1, "uniform"), UsageError);  // a stage without blocks
  EXPECT_THROW(PipelineGPT(whole.ptr(), 0, 0, "uniform"), UsageError);
  EXPECT_THROW(PipelineGPT(whole.ptr(), 2, 2, "uniform"), UsageError);
  EXPECT_THROW(PipelineGPT(whole.ptr(), -1, 2, "uniform"), UsageError);
  EXPECT_THROW(PipelineGPT(whole.ptr(), 0, 2, "type:Block"), UsageError);  // DeepSpeed's, not ours
  EXPECT_THROW(PipelineGPT(torch::nn::Linear(2, 2).ptr(), 0, 1, "uniform"), UsageError);
  PipelineGPT first(whole.ptr(), 0, 2, "uniform"), second(whole.ptr(), 1, 2, "uniform");
  EXPECT_THROW(second->forward(batch(0).first), UsageError);  // ids given to a middle/last stage
  EXPECT_THROW(first->loss(at::zeros({1, kT, kVocab}), batch(0).second), UsageError);
}

// Hook calls of one run(): ('b' | 'a', micro-batch, last).
using HookLog = std::vector<std::tuple<char, int, bool>>;

BackwardHooks logging_hooks(HookLog& log) {
  BackwardHooks h;
  h.before_backward = [&log](int mb, bool last) { log.emplace_back('b', mb, last); };
  h.after_backward = [&log](int mb, bool last) { log.emplace_back('a', mb, last); };
  return h;
}

// Each micro-batch once, `before` then `after` around it, `last` only on the final pair.
void expect_hook_log(const HookLog& log, const std::string& what) {
  ASSERT_EQ(log.size(), 2u * kMicro) << what;
  std::set<int> micro_batches;
  for (int k = 0; k < kMicro; ++k) {
    const auto& [b, mb, last] = log[2 * k];
    EXPECT_EQ(b, 'b') << what;
    EXPECT_EQ(log[2 * k + 1], std::make_tuple('a', mb, last)) << what;
    EXPECT_EQ(last, k == kMicro - 1) << what << " pair " << k;
    micro_batches.insert(mb);
  }
  EXPECT_EQ(micro_batches.size(), static_cast<size_t>(kMicro)) << what;
}

TEST(PipelineGpt, BackwardHooksOnOneStage) {
  auto whole = whole_gpt(true);
  PipelineGPT stage(whole.ptr(), 0, 1);
  PipelineExecutor exec([&](const at::Tensor& in) { return stage->forward(in); }, nullptr,
                        [&](const at::Tensor& out, const at::Tensor& t) { return stage->loss(out, t); });
  HookLog log;
  exec.set_backward_hooks(logging_hooks(log));
  const auto [x, y] = batch(0);
  for (const auto kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB}) {
    log.clear();
    exec.run(parallel::pipeline::make_schedule(kind, 1, kMicro, 0), x.chunk(kMicro), y.chunk(kMicro));
    expect_hook_log(log, "one stage");
  }
}

void sgd(torch::nn::Module& m) {
  at::NoGradGuard no_grad;
  for (auto& p : m.parameters()) {
    p.sub_(p.grad() * kLr);
    p.mutable_grad() = at::Tensor();
  }
}

// One stage of a p-stage run (this rank = stage) against the whole GPT trained in this process.
void train_stage(const std::shared_ptr<comm::Communicator>& c, ScheduleKind kind, bool tied) {
  const int p = c->size(), s = c->rank();
  const std::string what = std::string(kind == ScheduleKind::kGPipe ? "gpipe" : "1f1b") + (tied ? " tied" : " untied") +
                           " stage " + std::to_string(s) + "/" + std::to_string(p);
  auto ref = whole_gpt(tied);
  auto init = whole_gpt(tied);
  PipelineGPT stage{nullptr};
  {
    auto whole = whole_gpt(tied);
    stage = PipelineGPT(whole.ptr(), s, p, "parameters");
  }  // only this stage's modules stay alive
  // The embedding group: first and last stage (topology::ProcessGrid::embedding_groups() for one
  // pipeline). Every rank takes part in creating it.
  auto embedding_group = c->new_group({0, p - 1});
  PipelineExecutor exec([&](const at::Tensor& in) { return stage->forward(in); }, c,
                        [&](const at::Tensor& out, const at::Tensor& t) { return stage->loss(out, t); });
  HookLog log;
  exec.set_backward_hooks(logging_hooks(log));
  const auto params = stage->named_parameters();
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = batch(step);
    log.clear();
    const auto loss = exec.run(parallel::pipeline::make_schedule(kind, p, kMicro, s), x.chunk(kMicro), y.chunk(kMicro));
    expect_hook_log(log, what);
    for (const auto& name : stage->tied_parameters()) embedding_group->all_reduce(params[name].grad());
    sgd(*stage);

    const auto logits = ref->forward(x);
    const auto ref_loss = at::cross_entropy_loss(logits.reshape({-1, kVocab}), y.reshape({-1}));
    ref_loss.backward();
    sgd(*ref);
    if (stage->is_last()) {
      // Mean of 4 micro-batch means vs one mean over 8 rows: fp32 summation order (seen: 1 ulp).
      expect_close(loss, ref_loss.detach(), 1e-5, 0, what + " loss at step " + std::to_string(step));
    } else {
      EXPECT_FALSE(loss.defined()) << what;
    }
  }
  const auto want = ref->named_parameters();
  const auto start = init->named_parameters();
  for (const auto& q : params) {
    // Final values, and the change over the 3 steps (weights ~0.02 move by ~1e-3): gradients summed
    // over 4 micro-batches and two stages (tied wte) instead of one pass over 8 rows round
    // differently in fp32 (seen: at most 2e-8 absolute).
    expect_close(q.value(), want[q.key()], 1e-5, 1e-7, what + " " + q.key());
    const auto& w0 = start[q.key()];
    expect_close(q.value() - w0, want[q.key()] - w0, 1e-3, 1e-7, what + " change of " + q.key());
  }
}

TEST(PipelineGptWorker, TrainsLikeOneProcess) {
  XTRAIN_WORKER_ONLY();
  comm::CommOptions o;
  o.timeout_seconds = 60;
  auto c = comm::Communicator::create(comm::rank_info_from_env(), o);
  for (const bool tied : {true, false}) {
    train_stage(c, ScheduleKind::kGPipe, tied);
    train_stage(c, ScheduleKind::kOneFOneB, tied);
  }
  c->barrier();
}

// 4 ranks as tp = 2 x pp = 2 (rank = stage * 2 + tp_rank): each stage of a TensorParallelGPT over
// its tensor-parallel pair, trained as above; the unsharded parameters equal one process's GPT.
void train_tensor_parallel_stage(comm::Communicator& world, ScheduleKind kind) {
  constexpr int kTp = 2;
  const int pp = world.size() / kTp, s = world.rank() / kTp;
  std::shared_ptr<comm::Communicator> tp, pipe, embedding_group;  // every rank creates every group
  for (int k = 0; k < pp; ++k) {
    if (auto g = world.new_group({k * kTp, k * kTp + 1})) tp = g;
  }
  for (int t = 0; t < kTp; ++t) {
    std::vector<int> ranks;
    for (int k = 0; k < pp; ++k) ranks.push_back(k * kTp + t);
    if (auto g = world.new_group(ranks)) pipe = g;
    if (auto g = world.new_group({ranks.front(), ranks.back()})) embedding_group = g;
  }
  const std::string what = std::string(kind == ScheduleKind::kGPipe ? "gpipe" : "1f1b") + " tp x pp rank " +
                           std::to_string(world.rank());
  auto ref = whole_gpt(true);
  PipelineGPT stage{nullptr};
  {
    torch::manual_seed(7);
    TensorParallelGPT whole(options(true), tp);
    stage = PipelineGPT(whole.ptr(), s, pp, "parameters");
  }
  ASSERT_EQ(pipe->rank(), s);
  PipelineExecutor exec([&](const at::Tensor& in) { return stage->forward(in); }, pipe,
                        [&](const at::Tensor& out, const at::Tensor& t) { return stage->loss(out, t); });
  const auto params = stage->named_parameters();
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = batch(step);
    const auto schedule = parallel::pipeline::make_schedule(kind, pp, kMicro, s);
    const auto loss = exec.run(schedule, x.chunk(kMicro), y.chunk(kMicro));
    for (const auto& name : stage->tied_parameters()) embedding_group->all_reduce(params[name].grad());
    sgd(*stage);
    const auto logits = ref->forward(x);
    const auto ref_loss = at::cross_entropy_loss(logits.reshape({-1, kVocab}), y.reshape({-1}));
    ref_loss.backward();
    sgd(*ref);
    // The vocabulary-parallel log-sum-exp and the row-parallel sums round differently from GPT's,
    // and micro-batch means are averaged (seen: 1 ulp).
    if (stage->is_last()) expect_close(loss, ref_loss.detach(), 1e-5, 0, what + " loss " + std::to_string(step));
  }
  const auto specs = parallel::tensor::shard_specs(*stage);
  const auto want = ref->named_parameters();
  for (const auto& q : params) {
    const auto local = q.value().detach().contiguous();
    auto all = at::empty({kTp * local.numel()}, local.options());
    tp->all_gather(local.reshape({-1}), all);
    std::vector<at::Tensor> shards;
    for (int r = 0; r < kTp; ++r) shards.push_back(all.narrow(0, r * local.numel(), local.numel()).view(local.sizes()));
    const auto full = parallel::tensor::unshard(shards, specs.at(q.key()), q.key());
    // Split sums as for the loss, through 3 SGD steps (seen: at most 6e-8, 1 ulp of ln_f.weight ~1).
    expect_close(full, want[q.key()], 1e-5, 1e-7, what + " unsharded " + q.key());
  }
}

TEST(PipelineGptWorker, TensorParallelTrainsLikeOneProcess) {
  XTRAIN_WORKER_ONLY();
  comm::CommOptions o;
  o.timeout_seconds = 60;
  auto c = comm::Communicator::create(comm::rank_info_from_env(), o);
  train_tensor_parallel_stage(*c, ScheduleKind::kGPipe);
  train_tensor_parallel_stage(*c, ScheduleKind::kOneFOneB);
  c->barrier();
}

TEST(PipelineGpt, TensorAndPipelineParallelTrainLikeOneProcess) {
  testing::WorkerOptions o;
  o.world_size = 4;
  o.timeout_s = 120;
  testing::expect_workers_ok(testing::run_workers("PipelineGptWorker.TensorParallelTrainsLikeOneProcess", o));
}

void run(int world) {
  testing::WorkerOptions o;
  o.world_size = world;
  o.timeout_s = 120;
  testing::expect_workers_ok(testing::run_workers("PipelineGptWorker.TrainsLikeOneProcess", o));
}

TEST(PipelineGpt, TwoStagesTrainLikeOneProcess) { run(2); }
TEST(PipelineGpt, FourStagesTrainLikeOneProcess) { run(4); }

}  // namespace
}  // namespace xtrain::models::gpt_pipeline_test
