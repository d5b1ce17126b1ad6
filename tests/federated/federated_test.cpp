// `xtrain federated` through run_federated on a small labelled dataset and the built-in MLP: one
// client holding everything equals `xtrain train` bit for bit; FedProx's term has the gradient
// mu (w - w_global); secure aggregation (with dropout) gives the plain aggregation's model; bad flags
// and configs are errors that name them.
#include <gtest/gtest.h>

#include <ATen/Functions.h>
#include <torch/nn/module.h>

#include <fstream>
#include <map>

#include "support/errors.h"
#include "support/paths.h"
#include "xtrain/data/registry.h"
#include "xtrain/federated/federated.h"
#include "xtrain/run/train.h"

namespace xtrain::federated::federated_test {
namespace {

constexpr int64_t kFeatures = 6;

// 120 points: features a fixed function of the index, 4 classes.
class FedPoints : public data::Dataset {
 public:
  explicit FedPoints(int64_t offset) : offset_(offset) {}
  int64_t size() const override { return 120; }
  data::Batch collate(const std::vector<int64_t>& indices) const override {
    const auto B = static_cast<int64_t>(indices.size());
    data::Batch b{at::empty({B, kFeatures}, at::kFloat), at::empty({B}, at::kLong)};
    for (int64_t r = 0; r < B; ++r) {
      const int64_t i = indices[r] + offset_, label = (i * 5) % 4;
      for (int64_t f = 0; f < kFeatures; ++f) b.input[r][f] = std::sin(0.7 * i + f) + (f == label ? 1.0 : 0.0);
      b.target[r] = label;
    }
    return b;
  }
  data::DatasetInfo info() const override { return {"image", 0, 0, 4, {kFeatures}}; }

 private:
  int64_t offset_;
};

void register_points() {
  data::DatasetEntry d;
  d.description = "120 fixed points, 4 classes (federated test)";
  d.task = "classify";
  d.open = [](const data::DataOptions&, int64_t, const std::string&) {
    return data::Splits{std::make_shared<FedPoints>(0), std::make_shared<FedPoints>(1000)};
  };
  data::register_dataset("fed_points", d);
}

std::string write_config(const std::string& dir, const std::string& optimizer) {
  register_points();
  const std::string path = dir + "/ds_config.json";
  std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2,
    "optimizer": )" << optimizer << R"(,
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0.02, "warmup_max_lr": 0.05, "warmup_num_steps": 4,
                                                 "warmup_type": "linear"}},
    "xtrain": {"model": {"type": "mlp", "hidden": [16], "dropout": 0.2},
               "data": {"type": "fed_points", "prefetch": 0},
               "steps": 3, "eval_interval": 0, "eval_batches": 0, "save_interval": 0, "seed": 7}})";
  return path;
}

const char* kAdamW = R"({"type": "AdamW", "params": {"lr": 0.05, "weight_decay": 0.01}})";
const char* kSgd = R"({"type": "SGD", "params": {"lr": 0.05, "momentum": 0, "weight_decay": 0}})";

std::map<std::string, at::Tensor> as_map(const std::vector<std::pair<std::string, at::Tensor>>& v) {
  return {v.begin(), v.end()};
}

std::map<std::string, at::Tensor> trained(const std::string& config, int64_t steps, const std::string& dir) {
  TrainRequest r;
  r.config_path = config;
  r.output = dir;
  r.overrides = {"xtrain.steps=" + std::to_string(steps)};
  train(r);
  const TrainedRun run = load_trained_run(dir);
  std::map<std::string, at::Tensor> out;
  for (const auto& p : run.model.module->named_parameters()) out[p.key()] = p.value().detach();
  return out;
}

FederatedOptions options(const std::string& config, int64_t clients, int64_t rounds, int64_t local_steps) {
  FederatedOptions o;
  o.config_path = config;
  o.clients = clients;
  o.rounds = rounds;
  o.local_steps = local_steps;
  o.fraction = 1.0;
  o.quiet = true;
  return o;
}

void expect_equal(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(at::equal(t, b.at(name))) << name << " max diff " << (t - b.at(name)).abs().max().item<double>();
  }
}

// One client, fraction 1, one round of E local steps (AdamW, warm-up schedule, dropout, 2 micro-batches
// per step) is `xtrain train` for E steps; with plain SGD, R rounds of one step each are R steps too
// (the optimizer state that restarts each round is empty).
TEST(Federated, OneClientEqualsPlainTraining) {
  const std::string dir = testing::temp_dir("federated-one");
  const std::string adamw = write_config(dir, kAdamW);
  expect_equal(as_map(run_federated(options(adamw, 1, 1, 3)).parameters), trained(adamw, 3, dir + "/train_adamw"));
  const std::string sgd_dir = testing::temp_dir("federated-one-sgd");
  const std::string sgd = write_config(sgd_dir, kSgd);
  const auto fed = run_federated(options(sgd, 1, 3, 1));
  expect_equal(as_map(fed.parameters), trained(sgd, 3, sgd_dir + "/train_sgd"));
  ASSERT_EQ(fed.rounds.size(), 3u);
  EXPECT_EQ(fed.client_sizes, std::vector<int64_t>{120});
  EXPECT_EQ(fed.rounds[0].sampled, 1);
  EXPECT_GT(fed.rounds[2].eval.accuracy, 0.0);
}

// FedProx on SGD: the second local step adds -lr mu (w1 - w0) to the FedAvg step (the first step sees
// w = w_global, where the term's gradient is zero). DeepSpeed's linear warm-up gives steps 1 and 2
// warmup_min_lr = 0.02; w0 comes from a run at lr 0.
TEST(Federated, FedProxAddsMuTimesTheDistanceToTheGlobalModel) {
  const std::string dir = testing::temp_dir("federated-prox");
  const std::string sgd = write_config(dir, kSgd);
  auto o = options(sgd, 1, 1, 1);
  o.overrides = {"xtrain.model.dropout=0"};
  const auto w1 = as_map(run_federated(o).parameters);
  o.overrides = {"xtrain.model.dropout=0", "scheduler.params.warmup_min_lr=0", "scheduler.params.warmup_max_lr=0"};
  const auto w0 = as_map(run_federated(o).parameters);
  o.overrides = {"xtrain.model.dropout=0"};
  o.local_steps = 2;
  const auto avg = as_map(run_federated(o).parameters);
  o.prox_mu = 0.5;
  const auto prox = as_map(run_federated(o).parameters);
  for (const auto& [name, w] : prox) {
    const at::Tensor expected = -0.02 * 0.5 * (w1.at(name) - w0.at(name));
    EXPECT_TRUE(at::allclose(w - avg.at(name), expected, 1e-3, 2e-7)) << name;
    EXPECT_GT((w - avg.at(name)).abs().max().item<double>(), 1e-6) << name;
  }
}

// Five clients, Dirichlet split, one in three dropping out each round: the secure aggregate's model is
// the plain aggregate's to float tolerance, and the masked sum is within the fixed-point bound.
TEST(Federated, SecureAggregationWithDropoutMatchesPlainAggregation) {
  const std::string dir = testing::temp_dir("federated-secure");
  auto o = options(write_config(dir, kAdamW), 5, 3, 2);
  o.split = parse_split("dirichlet:1");
  o.fraction = 0.8;
  o.dropout = 0.34;
  o.seed = 5;
  const auto plain = run_federated(o);
  o.secure_agg = true;
  const auto secure = run_federated(o);
  int64_t dropped = 0;
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(secure.rounds[r].sampled, 4);
    EXPECT_EQ(secure.rounds[r].dropped, plain.rounds[r].dropped);
    dropped += secure.rounds[r].dropped;
    EXPECT_LE(secure.rounds[r].max_mask_error, 5 * std::ldexp(1.0, -33));
    EXPECT_GT(secure.rounds[r].bytes_up, plain.rounds[r].bytes_up);  // 8-byte ring values
  }
  EXPECT_GT(dropped, 0) << "the seed should drop someone";
  const auto a = as_map(plain.parameters), b = as_map(secure.parameters);
  for (const auto& [name, w] : a) EXPECT_TRUE(at::allclose(w, b.at(name), 1e-5, 1e-6)) << name;
}

TEST(Federated, DifferentialPrivacyReportsEpsilonPerRound) {
  const std::string dir = testing::temp_dir("federated-dp");
  auto o = options(write_config(dir, kSgd), 4, 2, 1);
  o.privacy = {0.5, 1.2, 1e-5};
  o.output = dir + "/out";
  const auto r = run_federated(o);
  EXPECT_DOUBLE_EQ(r.rounds[0].epsilon, rdp_epsilon(1.2, 1, 1e-5));
  EXPECT_DOUBLE_EQ(r.rounds[1].epsilon, rdp_epsilon(1.2, 2, 1e-5));
  std::ifstream metrics(o.output + "/metrics.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(metrics, line)) {
    ++lines;
    EXPECT_NE(line.find("\"epsilon\""), std::string::npos) << line;
  }
  EXPECT_EQ(lines, 2);
}

TEST(Federated, BadFlagsAndConfigsAreClearErrors) {
  const std::string dir = testing::temp_dir("federated-bad");
  const std::string cfg = write_config(dir, kAdamW);  // ZeRO refuses SGD at stage 3 before we would
  auto err = [&](const std::function<void(FederatedOptions&)>& change) {
    auto o = options(cfg, 3, 1, 1);
    change(o);
    return testing::expect_usage_error([&] { run_federated(o); });
  };
  EXPECT_NE(err([](auto& o) { o.clients = 0; }).find("--clients must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.fraction = 1.5; }).find("--fraction must be in (0, 1], got 1.5"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.local_steps = 0; }).find("--local-steps must be >= 1"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.dropout = 1; }).find("--dropout must be in [0, 1), got 1"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.prox_mu = -1; }).find("--prox-mu must be >= 0"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.privacy.clip = 1; }).find("needs all of --dp-clip C > 0, --dp-noise"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.privacy = {1, 1, 2}; }).find("--dp-delta must be in (0, 1), got 2"), std::string::npos);
  EXPECT_NE(err([](auto& o) { o.overrides = {"zero_optimization.stage=3"}; }).find("zero_optimization.stage 3"),
            std::string::npos);
}

}  // namespace
}  // namespace xtrain::federated::federated_test
