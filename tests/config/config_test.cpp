// Config: DeepSpeed semantics, every error path (unknown key with suggestion, wrong level, wrong
// type, inconsistent batch triple with its equation, unsupported feature), "auto", --set overrides.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/config/batch.h"
#include "xtrain/config/config.h"

namespace xtrain::config::config_test {
namespace {

Loaded load_json(const std::string& text, std::vector<std::string> overrides = {}, int64_t world = 1) {
  LoadOptions o;
  o.overrides = std::move(overrides);
  o.world_size = world;
  return load_text(text, o);
}

std::string usage_error(const std::string& text, std::vector<std::string> overrides = {}, int64_t world = 1) {
  try {
    load_json(text, std::move(overrides), world);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Config, DefaultsAreDeepSpeeds) {
  auto c = load_json("{}").config;
  EXPECT_EQ(c.optimizer.type, "AdamW");
  EXPECT_DOUBLE_EQ(c.engine.gradient_clipping, 0.0);
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.zero_optimization.sub_group_size, 1000000000);
  EXPECT_EQ(c.zero_optimization.stage3_prefetch_bucket_size, 50000000);
  EXPECT_FALSE(c.zero_optimization.overlap());
  EXPECT_EQ(c.aio.block_size, 1048576);
}

TEST(Config, IssueExampleParses) {
  auto c = load_json(R"({
    "train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}},
    "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 2000, "warmup_num_steps": 100}},
    "gradient_clipping": 1.0,
    "xtrain": {"model": {"type": "gpt", "layers": 4, "d_model": 256, "heads": 4, "seq_len": 256, "dropout": 0.0},
               "data": {"type": "text", "path": "mobydick"},
               "steps": 2000, "eval_interval": 200, "save_interval": 500, "seed": 1234}})").config;
  EXPECT_EQ(*c.engine.train_batch_size, 16);
  EXPECT_DOUBLE_EQ(c.optimizer.adam.weight_decay, 0.1);
  EXPECT_EQ(c.scheduler.type, "WarmupCosineLR");
  EXPECT_EQ(c.scheduler.cosine.warmup_num_steps, 100);
  EXPECT_EQ(c.model.layers, 4);
  EXPECT_EQ(c.trainer.steps, 2000);
  EXPECT_EQ(c.trainer.seed, 1234);
}

TEST(Config, UnknownKeyNamesClosestKey) {
  EXPECT_NE(usage_error(R"({"gradient_cliping": 1.0})").find("did you mean 'gradient_clipping'"), std::string::npos);
  EXPECT_NE(usage_error(R"({"zero_optimization": {"stgae": 2}})").find("'zero_optimization.stage'"), std::string::npos);
  EXPECT_NE(usage_error(R"({"zero_optimization": {"stage3_param_persitence_threshold": 10}})")
                .find("zero_optimization.stage3_param_persistence_threshold"),
            std::string::npos);
  EXPECT_NE(usage_error(R"({"optimizer": {"type": "AdamW", "params": {"weight_dacay": 0.1}}})")
                .find("optimizer.params.weight_decay"),
            std::string::npos);
}

TEST(Config, KnownKeyAtWrongLevel) {
  const auto e = usage_error(R"({"stage": 2})");
  EXPECT_NE(e.find("zero_optimization.stage"), std::string::npos) << e;
  const auto e2 = usage_error(R"({"xtrain": {"layers": 2}})");
  EXPECT_NE(e2.find("xtrain.model.layers"), std::string::npos) << e2;
}

TEST(Config, FarUnknownKeysAreIgnoredWithWarning) {
  auto loaded = load_json(R"({"cuda_visible_devices": "0,1", "comms_config": {"x": 1}})");
  ASSERT_EQ(loaded.warnings.size(), 2u);
  EXPECT_NE((loaded.warnings[0] + loaded.warnings[1]).find("ignoring unknown key 'cuda_visible_devices'"),
            std::string::npos);
}

TEST(Config, WrongTypeNamesKeyTypeAndValue) {
  const auto e = usage_error(R"({"optimizer": {"params": {"lr": "fast"}}})");
  EXPECT_NE(e.find("optimizer.params.lr must be a number"), std::string::npos) << e;
  EXPECT_NE(e.find("\"fast\""), std::string::npos) << e;
  EXPECT_NE(usage_error(R"({"fp16": {"enabled": "yes"}})").find("fp16.enabled must be true or false"), std::string::npos);
  EXPECT_NE(usage_error(R"({"zero_optimization": 3})").find("zero_optimization must be an object"), std::string::npos);
}

TEST(Config, IntegersWrittenAsFloatsAreAccepted) {
  auto c = load_json(R"({"zero_optimization": {"reduce_bucket_size": 5e8, "allgather_bucket_size": 1.000000e+09}})").config;
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.zero_optimization.allgather_bucket_size, 1000000000);
  EXPECT_NE(usage_error(R"({"zero_optimization": {"reduce_bucket_size": 2.5}})").find("an integer"), std::string::npos);
}

TEST(Config, AutoResolvesToDefaultsAndIsReported) {
  auto loaded = load_json(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 4,
                               "gradient_clipping": "auto", "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}})");
  EXPECT_DOUBLE_EQ(loaded.config.engine.gradient_clipping, 0.0);
  EXPECT_DOUBLE_EQ(loaded.config.optimizer.adam.lr, 1e-3);
  EXPECT_EQ(*loaded.config.engine.train_batch_size, 4);
  bool reported = false;
  for (const auto& n : loaded.notes) reported |= n.find("optimizer.params.lr") != std::string::npos;
  EXPECT_TRUE(reported);
}

TEST(Config, SetOverridesByDottedPath) {
  auto c = load_json("{}", {"optimizer.params.lr=3e-4", "xtrain.steps=200", "xtrain.model.attention.type=dense",
                            "optimizer.type=sgd", "xtrain.name=my run"})
               .config;
  EXPECT_DOUBLE_EQ(c.optimizer.sgd.lr, 3e-4);
  EXPECT_EQ(c.optimizer.type, "SGD");
  EXPECT_EQ(c.trainer.steps, 200);
  EXPECT_EQ(c.trainer.name, "my run");
  EXPECT_NE(usage_error("{}", {"xtrain.stesp=3"}).find("xtrain.steps"), std::string::npos);
  EXPECT_NE(usage_error("{}", {"novalue"}).find("key.path=value"), std::string::npos);
}

TEST(Config, UnsupportedFeatureIsAnError) {
  EXPECT_NE(usage_error(R"({"elasticity": {"enabled": true}})").find("not supported yet: elasticity.enabled"),
            std::string::npos);
  EXPECT_NE(usage_error(R"({"optimizer": {"type": "OneBitAdam"}})").find("not supported yet"), std::string::npos);
  // Present but disabled is accepted, with one line saying it has no effect here.
  const auto loaded = load_json(R"({"elasticity": {"enabled": false}})");
  ASSERT_EQ(loaded.warnings.size(), 1u);
  EXPECT_NE(loaded.warnings[0].find("elasticity has no effect here"), std::string::npos) << loaded.warnings[0];
}

TEST(Config, Fp16AndBf16TogetherIsAnError) {
  EXPECT_NE(usage_error(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})").find("choose one"),
            std::string::npos);
}

TEST(Config, DeprecatedAliases) {
  auto loaded = load_json(R"({"bfloat16": {"enabled": false}, "zero_optimization": {"prefetch_bucket_size": 1000}})");
  EXPECT_EQ(loaded.config.zero_optimization.stage3_prefetch_bucket_size, 1000);
  ASSERT_GE(loaded.warnings.size(), 2u);
  EXPECT_NE(usage_error(R"({"zero_optimization": {"prefetch_bucket_size": 1, "stage3_prefetch_bucket_size": 2}})")
                .find("give only one"),
            std::string::npos);
  EXPECT_EQ(load_json(R"({"zero_optimization": false})").config.zero_optimization.stage, 0);
}

TEST(Config, MaxGradNormInParamsIsRejected) {
  EXPECT_NE(usage_error(R"({"optimizer": {"type": "Adam", "params": {"max_grad_norm": 1.0}}})").find("gradient_clipping"),
            std::string::npos);
}

TEST(Config, DuplicateKeysAndBadJson) {
  EXPECT_NE(usage_error(R"({"steps_per_print": 1, "steps_per_print": 2})").find("appears twice"), std::string::npos);
  const auto e = usage_error("{\n \"a\": 1,\n \"b\": }");
  EXPECT_NE(e.find(":3:"), std::string::npos) << e;
  load_json("// comment\n{\"steps_per_print\": 5 /* inline */}");
}

TEST(Config, ChoicesSuggest) {
  const auto e = usage_error(R"({"scheduler": {"type": "WarmupCosine"}})");
  EXPECT_NE(e.find("did you mean 'WarmupCosineLR'"), std::string::npos) << e;
  const auto e2 = usage_error(R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "lin"}}})");
  EXPECT_NE(e2.find("\"log\", \"linear\""), std::string::npos) << e2;
}

TEST(Config, TotalNumStepsDefaultsToRunLength) {
  auto c = load_json(R"({"scheduler": {"type": "WarmupDecayLR"}, "xtrain": {"steps": 77}})").config;
  EXPECT_EQ(c.scheduler.warmup.total_num_steps, 77);
}

TEST(Config, ResolvedJsonRoundTrips) {
  auto c = load_json(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 8,
      "optimizer": {"type": "Lamb", "params": {"lr": 0.01, "max_coeff": 5}},
      "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.001, "cycle_max_lr": 0.01}}})").config;
  auto again = load_json(to_json(c)).config;
  EXPECT_EQ(to_json(c), to_json(again));
  EXPECT_EQ(*again.engine.gradient_accumulation_steps, 4);
  EXPECT_DOUBLE_EQ(again.optimizer.lamb.max_coeff, 5);
}

// DeepSpeed's own batch cases (tests/unit/runtime/test_ds_config_dict.py, 2 ranks).
TEST(Batch, DeepSpeedCases) {
  struct Case { int64_t tb, mb, gas; bool ok; };
  for (auto c : {Case{32, 16, 1, true}, Case{32, 8, 2, true}, Case{33, 17, 2, false}, Case{32, 18, 1, false}}) {
    bool ok = true;
    try { resolve_batch(c.tb, c.mb, c.gas, 2); } catch (const UsageError&) { ok = false; }
    EXPECT_EQ(ok, c.ok) << c.tb << " " << c.mb << " " << c.gas;
  }
  // Two of three.
  EXPECT_EQ(resolve_batch(32, 16, std::nullopt, 2).grad_accum, 1);
  EXPECT_EQ(resolve_batch(32, std::nullopt, 2, 2).micro_batch, 8);
  EXPECT_EQ(resolve_batch(std::nullopt, 16, 1, 2).train_batch_size, 32);
  // One of three.
  auto only_tb = resolve_batch(32, std::nullopt, std::nullopt, 2);
  EXPECT_EQ(only_tb.micro_batch, 16);
  EXPECT_EQ(only_tb.grad_accum, 1);
  EXPECT_EQ(resolve_batch(std::nullopt, 16, std::nullopt, 2).train_batch_size, 32);
  EXPECT_THROW(resolve_batch(std::nullopt, std::nullopt, 2, 2), UsageError);
}

// A batch key of 0 was a division by zero (SIGFPE) when another key was derived from it.
TEST(Batch, ZeroIsAnErrorWithTheEquationNotACrash) {
  struct Case { std::optional<int64_t> tb, mb, gas; const char* key; };
  for (const auto& c : {Case{32, 0, std::nullopt, "train_micro_batch_size_per_gpu must be > 0, got 0"},
                        Case{32, std::nullopt, 0, "gradient_accumulation_steps must be > 0, got 0"},
                        Case{0, 8, std::nullopt, "train_batch_size must be > 0, got 0"},
                        Case{32, 0, 0, "train_micro_batch_size_per_gpu must be > 0, got 0"},
                        Case{std::nullopt, 8, -2, "gradient_accumulation_steps must be > 0, got -2"}}) {
    try {
      resolve_batch(c.tb, c.mb, c.gas, 2);
      ADD_FAILURE() << "no error for " << c.key;
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(c.key), std::string::npos) << m;
      EXPECT_NE(m.find("* data-parallel size (2)"), std::string::npos) << m;
    }
  }
  const auto e = usage_error(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 0})");
  EXPECT_NE(e.find("train_batch_size (32) = train_micro_batch_size_per_gpu (0) * gradient_accumulation_steps (?)"),
            std::string::npos) << e;
}

TEST(Batch, InconsistentTriplePrintsTheEquation) {
  try {
    resolve_batch(10, 3, std::nullopt, 1);
    FAIL();
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("train_batch_size (10) must equal train_micro_batch_size_per_gpu (3) * "
                     "gradient_accumulation_steps (3) * data-parallel size (1) = 9"),
              std::string::npos)
        << m;
  }
  EXPECT_NE(usage_error(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 8})", {}, 8).find("= 0"),
            std::string::npos);
}

// The first line where `committed` and `generated` differ, both shown.
std::string first_difference(const std::string& committed, const std::string& generated) {
  std::istringstream c(committed), g(generated);
  std::string lc, lg;
  for (int line = 1;; ++line) {
    const bool more_c = static_cast<bool>(std::getline(c, lc)), more_g = static_cast<bool>(std::getline(g, lg));
    if (!more_c && !more_g) return "they differ only in the final newline";
    if (more_c && more_g && lc == lg) continue;
    return "first difference at line " + std::to_string(line) + ":\n  docs/config.md: " +
           (more_c ? lc : "(ends here)") + "\n  generated:      " + (more_g ? lg : "(ends here)");
  }
}

// docs/config.md in the source tree is what `xtrain config --docs` prints now (every options.h and
// registry entry's keys). Adding a key or a registry entry means regenerating the file.
TEST(Config, DocsAreUpToDate) {
  const std::string md = markdown_reference();
  EXPECT_NE(md.find("`zero_optimization.offload_optimizer.device`"), std::string::npos);
  EXPECT_NE(md.find("`optimizer.params (Lamb).max_coeff`"), std::string::npos);
  const std::string path = testing::source_dir() + "/docs/config.md";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << path << " is missing: generate it with `build/xtrain config --docs > docs/config.md`";
  std::stringstream committed;
  committed << in.rdbuf();
  if (committed.str() == md) return;
  ADD_FAILURE() << "docs/config.md is stale (" << first_difference(committed.str(), md)
                << ")\nregenerate it from the repository root with `build/xtrain config --docs > docs/config.md`"
                << " and commit it; `git diff docs/config.md` then shows every change";
}

// The stale-docs message points at the right line (a wrong hint would send the reader astray).
TEST(Config, DocsDiffHintNamesTheFirstDifferentLine) {
  EXPECT_EQ(first_difference("a\nb\nc\n", "a\nB\nc\n"), "first difference at line 2:\n  docs/config.md: b\n  generated:      B");
  EXPECT_EQ(first_difference("a\n", "a\nnew\n"), "first difference at line 2:\n  docs/config.md: (ends here)\n  generated:      new");
  EXPECT_EQ(first_difference("a\n", "a"), "they differ only in the final newline");
}

}  // namespace
}  // namespace xtrain::config::config_test
