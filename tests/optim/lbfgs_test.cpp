// L-BFGS (optim/lbfgs.h) driven by the engine's closure stage, against torch.optim.LBFGS
// (tests/reference/gen_lbfgs.py): with and without the strong-Wolfe line search, on a logistic
// regression and on a 4-D Rosenbrock function split over two parameters. Per step: the loss at the
// step's start, the number of loss evaluations, and every parameter. Then what the engine refuses.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "support/errors.h"
#include "support/fixtures.h"
#include "support/multiprocess.h"
#include "support/paths.h"
#include "xtrain/comm/communicator.h"
#include "xtrain/comm/rank_info.h"
#include "xtrain/config/config.h"
#include "xtrain/engine/engine.h"

namespace xtrain::lbfgs_test {
namespace {

using testing::expect_usage_error;

const std::map<std::string, at::Tensor>& fixture() {
  static const auto f = testing::load_tensors("lbfgs.pt");
  return f;
}

// The LBFGS params of each run in gen_lbfgs.py's RUNS.
const std::map<std::string, std::string> kRunParams = {
    {"logistic_plain", R"({"lr": 1.0, "max_iter": 4, "history_size": 3})"},
    {"logistic_wolfe", R"({"lr": 1.0, "max_iter": 4, "history_size": 3, "line_search_fn": "strong_wolfe"})"},
    {"rosen_plain", R"({"lr": 0.2, "max_iter": 5, "history_size": 4, "line_search_fn": null})"},
    {"rosen_wolfe", R"({"lr": 1.0, "max_iter": 6, "history_size": 4, "line_search_fn": "strong_wolfe"})"},
};

config::Config lbfgs_config(const std::string& params, const std::string& extra = "") {
  return config::load_text(R"({"train_micro_batch_size_per_gpu": 64, )" + extra +
                               R"("optimizer": {"type": "LBFGS", "params": )" + params + "}}",
                           {})
      .config;
}

struct Problem {
  zero::NamedParams params;
  data::Batch batch;
  Engine::LossFn loss;
  int64_t calls = 0;  // loss evaluations
};

void make_problem(const std::string& name, Problem& p) {
  const auto& fx = fixture();
  const bool logistic = name == "logistic";
  for (const char* k : logistic ? std::vector<const char*>{"weight", "bias"} : std::vector<const char*>{"a", "b"}) {
    p.params.emplace_back(k, fx.at(name + "/init/" + k).clone().requires_grad_(true));
  }
  if (logistic) {
    p.batch = {fx.at("logistic/x"), fx.at("logistic/y")};
    p.loss = [&p](const data::Batch& b) {
      ++p.calls;
      return at::binary_cross_entropy_with_logits(at::linear(b.input, p.params[0].second, p.params[1].second),
                                                  b.target);
    };
  } else {
    p.batch = {at::zeros({1}), at::zeros({1})};  // the loss reads only the parameters
    p.loss = [&p](const data::Batch&) {
      ++p.calls;
      const at::Tensor v = at::cat({p.params[0].second, p.params[1].second});
      const at::Tensor head = v.narrow(0, 0, 3), tail = v.narrow(0, 1, 3);
      return (100 * (tail - head.pow(2)).pow(2) + (1 - head).pow(2)).sum();
    };
  }
}

class LbfgsTrajectory : public ::testing::TestWithParam<std::string> {};

TEST_P(LbfgsTrajectory, MatchesTorch) {
  const std::string run = GetParam();
  const std::string problem = run.substr(0, run.find('_'));
  Problem p;
  make_problem(problem, p);
  Engine engine(p.params, [&p](const data::Batch& b) { return p.loss(b); }, lbfgs_config(kRunParams.at(run)));
  const auto& fx = fixture();
  const auto losses = fx.at(run + "/losses");
  const auto evals = fx.at(run + "/evals");
  for (int64_t k = 0; k < losses.numel(); ++k) {
    p.calls = 0;
    engine.backward(engine.forward(p.batch));
    ASSERT_TRUE(engine.step());
    const std::string at_step = run + " step " + std::to_string(k + 1);
    // The same ATen ops in the same order as torch: equal up to fp32 rounding of the few scalars
    // Python keeps in double; 1e-6 relative is what the brief asks and far below one iteration's move.
    const double want = losses[k].item<double>();
    EXPECT_NEAR(engine.last_step().loss, want, 1e-6 * std::abs(want)) << at_step;
    EXPECT_EQ(p.calls, evals[k].item<int64_t>()) << at_step << ": loss evaluations";
    for (const auto& [name, t] : p.params) {
      testing::expect_close(t, fx.at(run + "/step" + std::to_string(k + 1) + "/" + name), 1e-6, 1e-7,
                            at_step + " " + name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Runs, LbfgsTrajectory,
                         ::testing::Values("logistic_plain", "logistic_wolfe", "rosen_plain", "rosen_wolfe"));

// Data parallelism: each evaluation's gradient and loss are averaged over the ranks, so 2 ranks with
// 32 rows each follow torch's full-batch (64-row) trajectory. Each rank writes its parameters and
// losses after every step.
TEST(LbfgsWorker, TwoRanksHalfTheRowsEach) {
  XTRAIN_WORKER_ONLY();
  const auto info = comm::rank_info_from_env();
  auto dp = comm::Communicator::create(info, comm::CommOptions{});
  Problem p;
  make_problem("logistic", p);
  const int64_t rows = p.batch.input.size(0) / info.world_size;
  const data::Batch mine{p.batch.input.narrow(0, info.rank * rows, rows),
                         p.batch.target.narrow(0, info.rank * rows, rows)};
  config::LoadOptions lo;
  lo.world_size = info.world_size;
  lo.quiet = true;
  const auto cfg = config::load_text(R"({"train_micro_batch_size_per_gpu": 32, "optimizer": {"type": "LBFGS",
      "params": {"lr": 1.0, "max_iter": 4, "history_size": 3, "line_search_fn": "strong_wolfe"}}})", lo).config;
  Engine engine(p.params, [&p](const data::Batch& b) { return p.loss(b); }, cfg, dp);
  std::ofstream out(testing::worker_env("LBFGS_OUT") + "." + std::to_string(info.rank));
  out.precision(17);
  for (int k = 0; k < 6; ++k) {
    engine.backward(engine.forward(mine));
    engine.step();
    out << engine.last_step().loss;
    for (const auto& [name, t] : p.params) {
      const at::Tensor flat = t.detach().reshape({-1});
      for (int64_t i = 0; i < flat.numel(); ++i) out << " " << flat[i].item<double>();
    }
    out << "\n";
  }
}

TEST(Lbfgs, DataParallelFollowsTheFullBatchTrajectory) {
  const std::string out = testing::binary_dir() + "/lbfgs_dp_test";
  testing::WorkerOptions o;
  o.world_size = 2;
  o.timeout_s = 120;
  o.env = {{"LBFGS_OUT", out}};
  testing::expect_workers_ok(testing::run_workers("LbfgsWorker.TwoRanksHalfTheRowsEach", o));
  const auto& fx = fixture();
  std::vector<std::vector<double>> ranks(2);
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(out + "." + std::to_string(r));
    ASSERT_TRUE(in.good()) << "rank " << r;
    for (double v = 0; in >> v;) ranks[r].push_back(v);
    std::remove((out + "." + std::to_string(r)).c_str());
  }
  ASSERT_EQ(ranks[0].size(), 6u * 7u);
  EXPECT_EQ(ranks[0], ranks[1]);  // every rank takes the same steps, bit for bit
  for (int k = 0; k < 6; ++k) {
    const double* row = ranks[0].data() + k * 7;  // loss, weight [5], bias
    const std::string step = "logistic_wolfe/step" + std::to_string(k + 1) + "/";
    const at::Tensor want = at::cat({fx.at(step + "weight").reshape({-1}), fx.at(step + "bias").reshape({-1})});
    // Two partial sums all-reduced instead of one sum: fp32 rounding in another order (~1e-7 per
    // evaluation). The weights grow along a nearly separable direction where the loss is flat, so
    // by step 5 that rounding moves them by ~2e-5 relative; 1e-4 still fails by orders of magnitude
    // on a wrong average (the gradient off by the rank count) or a rank skipping a reduction.
    EXPECT_NEAR(row[0], fx.at("logistic_wolfe/losses")[k].item<double>(), 1e-5) << "step " << k + 1;
    for (int64_t i = 0; i < want.numel(); ++i) {
      EXPECT_NEAR(row[1 + i], want[i].item<double>(), 1e-4 * std::max(1.0, std::abs(want[i].item<double>())))
          << "step " << k + 1 << " element " << i;
    }
  }
}

TEST(Lbfgs, RefusesWhatItCannotCombineWith) {
  const std::string params = R"({"max_iter": 3})";
  auto refused = [&](const std::string& extra) {
    return expect_usage_error([&] { check_closure_optimizer(lbfgs_config(params, extra)); });
  };
  EXPECT_NE(refused(R"("zero_optimization": {"stage": 1}, )").find("zero_optimization.stage must be 0, got 1"),
            std::string::npos);
  EXPECT_NE(refused(R"("gradient_accumulation_steps": 2, )").find("gradient_accumulation_steps must be 1, got 2"),
            std::string::npos);
  EXPECT_NE(refused(R"("fp16": {"enabled": true}, )").find("disable fp16, bf16 and amp"), std::string::npos);
  EXPECT_NE(refused(R"("bf16": {"enabled": true}, )").find("it needs fp32"), std::string::npos);
  EXPECT_NE(refused(R"("gradient_clipping": 1.0, )").find("gradient_clipping must be 0, got 1"), std::string::npos);
  // The engine itself checks before building anything.
  Problem p;
  make_problem("rosen", p);
  const auto cfg = lbfgs_config(params, R"("zero_optimization": {"stage": 2}, )");
  EXPECT_NE(expect_usage_error([&] { Engine e(p.params, p.loss, cfg); }).find("optimizer LBFGS re-evaluates the loss"),
            std::string::npos);
}

TEST(Lbfgs, ConfigKeysAndErrors) {
  const auto cfg = lbfgs_config(R"({"max_iter": 8, "line_search_fn": null})");
  EXPECT_EQ(cfg.optimizer.type, "LBFGS");
  EXPECT_DOUBLE_EQ(cfg.optimizer.lr(), 1.0);  // torch's default lr
  auto error = [](const std::string& params) {
    return expect_usage_error([&] { lbfgs_config(params); });
  };
  EXPECT_NE(error(R"({"line_search_fn": "wolfe"})")
                .find("optimizer.params.line_search_fn must be null or \"strong_wolfe\""),
            std::string::npos);
  EXPECT_NE(error(R"({"max_iter": 0})").find("max_iter, max_eval and history_size must be >= 1"), std::string::npos);
  EXPECT_NE(error(R"({"histroy_size": 5})").find("history_size"), std::string::npos);  // did you mean
  // One parameter group, as torch: a group with its own lr is refused by name.
  Problem p;
  make_problem("rosen", p);
  const auto grouped = config::load_text(R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "LBFGS"},
      "xtrain": {"param_groups": [{"params": ["a"], "lr_scale": 0.5}]}})", {}).config;
  Engine e(p.params, p.loss, grouped);
  e.backward(e.forward(p.batch));
  EXPECT_NE(expect_usage_error([&] { e.step(); }).find("LBFGS takes one parameter group"), std::string::npos);
}

}  // namespace
}  // namespace xtrain::lbfgs_test
