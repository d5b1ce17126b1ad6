// XTRAIN_SMOKE (engine/smoke.h): the switch's values, and the overrides it adds to a training run:
// tiny where the user's config allows it, and never against what the config requires (windows need
// heads, tensor parallelism divides heads, pipeline stages need layers, a --set seq_len stays).
#include "xtrain/run/smoke.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "xtrain/base/error.h"
#include "xtrain/models/factory.h"

namespace xtrain::smoke::smoke_test {
namespace {

struct SmokeEnv {  // sets XTRAIN_SMOKE for one test, restores "unset" after it
  explicit SmokeEnv(const char* value) { setenv("XTRAIN_SMOKE", value, 1); }
  ~SmokeEnv() { unsetenv("XTRAIN_SMOKE"); }
};

config::Config load(const std::vector<std::string>& overrides, int64_t world = 1) {
  config::LoadOptions o;
  o.overrides = overrides;
  o.world_size = world;
  o.quiet = true;
  return config::load_text("{}", o).config;
}

// The config as `xtrain train` runs it with the switch on: the user's overrides, then the smoke's.
config::Config shrunk(std::vector<std::string> user, int64_t world = 1) {
  const auto extra = train_overrides(load(user, world), user, /*resumed=*/false);
  const auto all = [&] {
    auto v = user;
    v.insert(v.end(), extra.begin(), extra.end());
    return v;
  }();
  return load(all, world);
}

TEST(Smoke, OffUnlessSetAndOtherValuesAreAnError) {
  unsetenv("XTRAIN_SMOKE");
  EXPECT_FALSE(enabled());
  EXPECT_EQ(cap(500, 2), 500);
  {
    SmokeEnv off("0");
    EXPECT_FALSE(enabled());
  }
  {
    SmokeEnv on("1");
    EXPECT_TRUE(enabled());
    EXPECT_EQ(cap(500, 2), 2);
    EXPECT_EQ(cap(0, 2), 2);  // 0 means "all"
    EXPECT_EQ(cap(1, 2), 1);
  }
  SmokeEnv typo("yes");
  try {
    enabled();
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("XTRAIN_SMOKE"), std::string::npos) << e.what();
  }
}

// The README's multi-scale command: 4 heads over the 3 default windows stay 4 (the uneven split
// is what the command exercises), and the context the command sets is kept.
TEST(Smoke, ReadmeMultiscaleKeepsFourHeadsAndTheUsersContext) {
  const auto c = shrunk({"xtrain.model.attention.type=multiscale", "xtrain.model.seq_len=4096"});
  EXPECT_EQ(c.trainer.steps, 2);
  EXPECT_EQ(c.trainer.eval_batches, 1);
  EXPECT_EQ(*c.engine.train_micro_batch_size_per_gpu, 2);
  EXPECT_EQ(c.model.layers, 1);
  EXPECT_EQ(c.model.heads, 4);
  EXPECT_EQ(c.model.d_model, 64);
  EXPECT_EQ(c.model.seq_len, 4096);
  EXPECT_NO_THROW(models::build_model(c.model));
  EXPECT_EQ(shrunk({}).model.seq_len, 64);  // not set by the command: shortened
}

TEST(Smoke, HeadsCoverTheWindowsAndTheTensorParallelSize) {
  const auto five =
      shrunk({"xtrain.model.attention.type=multiscale", "xtrain.model.attention.windows=[1,2,4,8,16]"});
  EXPECT_EQ(five.model.heads, 5);
  EXPECT_EQ(five.model.d_model, 80);
  EXPECT_NO_THROW(models::build_model(five.model));
  const auto tp = shrunk({"tensor_parallel.size=2", "xtrain.model.heads=6", "xtrain.model.d_model=384"}, 2);
  EXPECT_EQ(tp.model.heads, 4);  // min(6, 4), a multiple of 2
  EXPECT_EQ(tp.model.heads % 2, 0);
  const auto pp = shrunk({"pipeline.stages=4", "gradient_accumulation_steps=8"}, 4);
  EXPECT_EQ(pp.model.layers, 4);  // one block per stage
  EXPECT_EQ(*pp.engine.gradient_accumulation_steps, 8);  // the schedule's micro-batches stay
}

TEST(Smoke, ResumeAddsTwoStepsAndLeavesTheModelAlone) {
  const auto saved = load({"xtrain.steps=2", "xtrain.model.seq_len=4096"});
  const auto extra = train_overrides(saved, {}, /*resumed=*/true);
  EXPECT_EQ(extra, std::vector<std::string>{"xtrain.steps=4"});
  const auto sweep = train_overrides(saved, {}, /*resumed=*/false, /*lr_sweep=*/true);
  EXPECT_NE(std::find(sweep.begin(), sweep.end(), "xtrain.steps=10"), sweep.end());
}

}  // namespace
}  // namespace xtrain::smoke::smoke_test
