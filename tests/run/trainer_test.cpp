// The training loop end to end on a small text file: exact resume (N straight steps and N/2 +
// resume + N/2 give the same checkpoint fingerprint), checkpoint pruning, refusing to overwrite a
// run, and the run directory's contents.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/checkpoint/store.h"
#include "xtrain/run/train.h"

namespace xtrain::trainer_test {
namespace {
namespace fs = std::filesystem;

TrainRequest tiny(const std::string& corpus, const std::string& run_dir, int64_t steps) {
  TrainRequest r;
  r.output = run_dir;
  r.overrides = {"xtrain.data.path=" + corpus, "xtrain.model.layers=1", "xtrain.model.d_model=32",
                 "xtrain.model.heads=2", "xtrain.model.seq_len=16", "xtrain.model.dropout=0.1",
                 "train_micro_batch_size_per_gpu=4", "gradient_accumulation_steps=2",
                 "scheduler.type=WarmupLR", "scheduler.params.warmup_num_steps=3",
                 "scheduler.params.warmup_max_lr=0.003", "xtrain.steps=" + std::to_string(steps),
                 "xtrain.eval_interval=3", "xtrain.eval_batches=2", "xtrain.save_interval=4",
                 "xtrain.keep_checkpoints=2", "xtrain.generate.tokens=0", "xtrain.data.prefetch=1"};
  return r;
}

TEST(Trainer, ResumeIsExact) {
  const std::string dir = testing::temp_dir("trainer-resume");
  const std::string corpus = testing::write_corpus(dir, 400, 17);
  // Dropout is on, so the RNG state must be restored too; the data order comes from the sampler.
  train(tiny(corpus, dir + "/straight", 10));
  train(tiny(corpus, dir + "/split", 5));
  auto again = tiny(corpus, dir + "/split", 10);
  again.resume = true;
  train(again);
  EXPECT_EQ(checkpoint::fingerprint(dir + "/straight"), checkpoint::fingerprint(dir + "/split"));
  // A different run (another seed) must not collide.
  auto other = tiny(corpus, dir + "/other", 10);
  other.overrides.push_back("xtrain.seed=99");
  train(other);
  EXPECT_NE(checkpoint::fingerprint(dir + "/straight"), checkpoint::fingerprint(dir + "/other"));
}

TEST(Trainer, RunDirectoryContentsAndPruning) {
  const std::string dir = testing::temp_dir("trainer-run");
  const std::string corpus = testing::write_corpus(dir, 400, 17);
  const auto result = train(tiny(corpus, dir + "/run", 12));
  EXPECT_EQ(result.steps, 12);
  EXPECT_TRUE(fs::exists(dir + "/run/config.json"));
  EXPECT_TRUE(fs::exists(dir + "/run/metrics.jsonl"));
  // Saves at 4, 8, 12; keep_checkpoints=2 leaves the newest two.
  EXPECT_EQ(checkpoint::list_tags(dir + "/run/checkpoints"), (std::vector<std::string>{"global_step8", "global_step12"}));
  EXPECT_EQ(checkpoint::latest_tag(dir + "/run/checkpoints"), "global_step12");
  EXPECT_TRUE(std::isfinite(result.final_eval.loss));
  // Training again into the same directory without --resume is refused.
  EXPECT_THROW(train(tiny(corpus, dir + "/run", 12)), UsageError);
}

TEST(Trainer, TrainedRunLoadsForEvaluation) {
  const std::string dir = testing::temp_dir("trainer-eval");
  const std::string corpus = testing::write_corpus(dir, 400, 17);
  const auto result = train(tiny(corpus, dir + "/run", 4));
  auto run = load_trained_run(dir + "/run");
  EXPECT_EQ(run.model.task, "lm");
  const std::string text = generate_text(run.model, "the ", 8, 1.0, 0, 5);
  EXPECT_EQ(text.size(), 8u);
  EXPECT_EQ(text, generate_text(run.model, "the ", 8, 1.0, 0, 5));  // same seed, same text
}

}  // namespace
}  // namespace xtrain::trainer_test
