// xtrain.data.ordering through the trainer: a difficulty-ordered run resumes exactly (N straight
// steps = N/2 + resume + N/2) and differs from the shuffled run, its scores are cached in the run
// directory, and scorer=loss gives each scored window the reference model's cross-entropy
// (checked against at::cross_entropy on the reference run's model).
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/data/difficulty_scorer.h"
#include "xtrain/run/train.h"

namespace xtrain::data_ordering_trainer_test {
namespace {
namespace fs = std::filesystem;

TrainRequest tiny(const std::string& corpus, const std::string& run_dir, int64_t steps, bool ordered) {
  TrainRequest r;
  r.output = run_dir;
  r.overrides = {"xtrain.data.path=" + corpus, "xtrain.model.layers=1", "xtrain.model.d_model=32",
                 "xtrain.model.heads=2", "xtrain.model.seq_len=16", "xtrain.model.dropout=0.0",
                 "train_micro_batch_size_per_gpu=4", "gradient_accumulation_steps=2",
                 "scheduler.type=WarmupLR", "scheduler.params.warmup_num_steps=3",
                 "scheduler.params.warmup_max_lr=0.003", "xtrain.steps=" + std::to_string(steps),
                 "xtrain.eval_interval=0", "xtrain.eval_batches=2", "xtrain.save_interval=5",
                 "xtrain.generate.tokens=0", "xtrain.data.prefetch=1"};
  if (ordered) {
    r.overrides.insert(r.overrides.end(), {"xtrain.data.ordering.enabled=true", "xtrain.data.ordering.random_mix=0.25",
                                           "xtrain.data.ordering.score_samples=100"});
  }
  return r;
}

// The cache: one header line, then int64 indices and float32 scores (difficulty_scorer.cpp).
data::DifficultyScores read_cache(const std::string& path, int64_t count) {
  std::ifstream in(path, std::ios::binary);
  std::string header;
  std::getline(in, header);
  data::DifficultyScores s{std::vector<int64_t>(count), std::vector<float>(count)};
  in.read(reinterpret_cast<char*>(s.indices.data()), count * 8);
  in.read(reinterpret_cast<char*>(s.values.data()), count * 4);
  EXPECT_TRUE(bool(in)) << path;
  return s;
}

TEST(DataOrderingTrainer, OrderedRunResumesExactlyAndCachesItsScores) {
  const std::string dir = testing::temp_dir("ordering-resume");
  const std::string corpus = testing::write_corpus(dir, 300, 13, " jumps over the lazy dog. aaaa     ");
  train(tiny(corpus, dir + "/straight", 10, true));
  train(tiny(corpus, dir + "/split", 5, true));
  auto again = tiny(corpus, dir + "/split", 10, true);
  again.resume = true;
  train(again);  // reads the cached scores
  EXPECT_EQ(checkpoint::fingerprint(dir + "/straight"), checkpoint::fingerprint(dir + "/split"));
  EXPECT_TRUE(fs::exists(dir + "/straight/difficulty_scores.bin"));
  train(tiny(corpus, dir + "/shuffled", 10, false));
  EXPECT_NE(checkpoint::fingerprint(dir + "/straight"), checkpoint::fingerprint(dir + "/shuffled"));
}

TEST(DataOrderingTrainer, LossScorerIsTheReferenceModelsCrossEntropy) {
  const std::string dir = testing::temp_dir("ordering-loss");
  const std::string corpus = testing::write_corpus(dir, 300, 13, " jumps over the lazy dog. aaaa     ");
  train(tiny(corpus, dir + "/reference", 5, false));
  auto r = tiny(corpus, dir + "/scored", 2, true);
  r.overrides.insert(r.overrides.end(), {"xtrain.data.ordering.scorer=loss",
                                         "xtrain.data.ordering.reference_checkpoint=" + dir + "/reference"});
  train(r);
  const auto scores = read_cache(dir + "/scored/difficulty_scores.bin", 100);
  auto ref = load_trained_run(dir + "/reference");
  ref.model.module->eval();
  const auto splits = data::open_datasets(ref.config.data, ref.config.model.seq_len, data::default_cache_dir());
  at::NoGradGuard no_grad;
  for (int k = 0; k < 100; k += 17) {
    const auto b = splits.train->collate({scores.indices[k]});
    const double want = at::cross_entropy_loss(ref.model.forward(b.input)[0], b.target[0]).item<double>();
    EXPECT_NEAR(scores.values[k], want, 1e-5) << "sample " << scores.indices[k];  // float32 sums over T=16
  }
  // A bad reference names the key.
  auto bad = tiny(corpus, dir + "/bad", 2, true);
  bad.overrides.insert(bad.overrides.end(), {"xtrain.data.ordering.scorer=loss",
                                             "xtrain.data.ordering.reference_checkpoint=" + dir + "/nothing"});
  try {
    train(bad);
    ADD_FAILURE() << "a missing reference run was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("xtrain.data.ordering.reference_checkpoint"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xtrain::data_ordering_trainer_test
