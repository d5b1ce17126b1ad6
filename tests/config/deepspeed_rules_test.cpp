// DeepSpeed's acceptance rules (DeepSpeed 0.16, ../shared/reference/deepspeed.md and its source):
// what DeepSpeed runs is accepted (with one line where a key has no effect here), what it rejects is
// rejected with its reason, and every error of a file is reported at once.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "support/paths.h"
#include "xtrain/base/error.h"
#include "xtrain/config/config.h"
#include "xtrain/config/key_status.h"
#include "xtrain/precision/loss_scaler.h"

namespace xtrain::config::deepspeed_rules_test {
namespace {

Loaded load_json(const std::string& text) { return load_text(text, LoadOptions{}); }

std::string usage_error(const std::string& text) {
  try {
    load_json(text);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<no error>";
}

std::string all(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(DeepSpeedRules, ExtraBf16KeysAreIgnoredWithOneWarning) {
  for (const char* section : {"bf16", "bfloat16"}) {
    const auto loaded = load_json(std::string(R"({")") + section +
                                  R"(": {"enabled": true, "loss_scale": 0, "hysteresis": 2, "initial_scale_power": 16}})");
    EXPECT_TRUE(loaded.config.bf16.enabled) << section;
    std::string named;
    for (const auto& w : loaded.warnings) {
      if (has(w, "loss_scale")) named += w;
    }
    EXPECT_TRUE(has(named, std::string(section) + ".loss_scale") && has(named, std::string(section) + ".hysteresis") &&
                has(named, std::string(section) + ".initial_scale_power"))
        << all(loaded.warnings);
    EXPECT_EQ(std::count(named.begin(), named.end(), '\n'), 0) << "one warning for all of them: " << all(loaded.warnings);
  }
  // A near miss of a real bf16 key is still a typo, named with the right key.
  EXPECT_TRUE(has(usage_error(R"({"bf16": {"enabeld": true}})"), "did you mean 'bf16.enabled'"));
}

TEST(DeepSpeedRules, AMisspeltAutoOrNullKeyWarnsAndAnyOtherValueFails) {
  // FastChat's ZeRO-3 file spells "micro_batch_size_per_gpu": "auto"; DeepSpeed ignores the key and
  // derives the same micro batch, so the file runs, with the suggestion as a warning.
  for (const char* value : {"\"auto\"", "null"}) {
    const auto loaded = load_json(std::string(R"({"train_batch_size": 16, "micro_batch_size_per_gpu": )") + value + "}");
    EXPECT_EQ(loaded.config.engine.train_batch_size.value_or(0), 16);
    EXPECT_TRUE(has(all(loaded.warnings), "did you mean 'train_micro_batch_size_per_gpu'")) << all(loaded.warnings);
  }
  EXPECT_TRUE(has(usage_error(R"({"train_batch_size": 16, "micro_batch_size_per_gpu": 4})"),
                  "did you mean 'train_micro_batch_size_per_gpu'"));
}

TEST(DeepSpeedRules, RefusedFp16KeysChangeNothingWhileFp16IsOff) {
  const auto off = load_json(R"({"fp16": {"enabled": false, "fp16_master_weights_and_grads": true}})");
  EXPECT_TRUE(has(all(off.warnings), "fp16.fp16_master_weights_and_grads has no effect")) << all(off.warnings);
  EXPECT_TRUE(has(usage_error(R"({"fp16": {"enabled": true, "fp16_master_weights_and_grads": true}})"),
                  "not supported yet: fp16.fp16_master_weights_and_grads"));
}

TEST(DeepSpeedRules, AWorldSizeThatAutotpDoesNotDivideNamesAutotpSize) {
  EXPECT_TRUE(has(usage_error(R"({"tensor_parallel": {"autotp_size": 2}})"),
                  "world size 1 is not divisible by tensor_parallel.autotp_size (2)"));
  EXPECT_TRUE(has(usage_error(R"({"tensor_parallel": {"size": 2}})"),
                  "world size 1 is not divisible by tensor_parallel.size (2)"));
}

TEST(DeepSpeedRules, NullIsTheDefaultWhereDeepSpeedsDefaultIsNull) {
  const auto c = load_json(R"({"activation_checkpointing": {"number_checkpoints": null}, "steps_per_print": null,
                               "communication_data_type": null, "data_types": {"grad_accum_dtype": null},
                               "zero_optimization": {"overlap_comm": null}, "train_batch_size": null,
                               "train_micro_batch_size_per_gpu": 4})").config;
  EXPECT_EQ(c.activation_checkpointing.number_checkpoints, -1);
  EXPECT_EQ(c.engine.steps_per_print, 10);
  EXPECT_EQ(c.engine.communication_data_type, "");
  EXPECT_EQ(*c.engine.train_batch_size, 4);
  // Elsewhere null is not DeepSpeed's default: an error that says how to get the default.
  const auto e = usage_error(R"({"gradient_clipping": null})");
  EXPECT_TRUE(has(e, "gradient_clipping must be a number, got null")) << e;
  EXPECT_TRUE(has(e, "drop the key to use the default")) << e;
}

TEST(DeepSpeedRules, ReduceBucketSizeZero) {
  // Stage 0: DeepSpeed does not use it (fixed 5e8-element all-reduce buckets).
  const auto loaded = load_json(R"({"zero_optimization": {"stage": 0, "reduce_bucket_size": 0}})");
  EXPECT_EQ(loaded.config.zero_optimization.reduce_bucket_size, 500000000);
  EXPECT_TRUE(has(all(loaded.warnings), "reduce_bucket_size 0 has no effect at stage 0")) << all(loaded.warnings);
  // Stages 1-3: DeepSpeed divides by it at the first backward.
  for (int stage : {1, 2, 3}) {
    const auto e = usage_error(c10::str(R"({"zero_optimization": {"stage": )", stage, R"(, "reduce_bucket_size": 0}})"));
    EXPECT_TRUE(has(e, "zero_optimization.reduce_bucket_size must be > 0 with ZeRO stage " + std::to_string(stage)) &&
                has(e, "ZeroDivisionError"))
        << e;
  }
}

TEST(DeepSpeedRules, ProfileStepMinusOneProfilesNothing) {
  const auto loaded = load_json(R"({"flops_profiler": {"enabled": true, "profile_step": -1}})");
  EXPECT_FALSE(loaded.config.flops_profiler.enabled);
  EXPECT_TRUE(loaded.config.engine.wall_clock_breakdown) << "an enabled profiler turns the step timers on";
  EXPECT_TRUE(has(all(loaded.warnings), "flops_profiler.profile_step -1 is never reached")) << all(loaded.warnings);
  EXPECT_TRUE(load_json(R"({"flops_profiler": {"enabled": true, "profile_step": 3}})").config.flops_profiler.enabled);
}

TEST(DeepSpeedRules, OffloadParamBelowStageThreeHasNoEffect) {
  for (int stage : {0, 1, 2}) {
    const auto loaded = load_json(
        c10::str(R"({"zero_optimization": {"stage": )", stage, R"(, "offload_param": {"device": "cpu"}}})"));
    EXPECT_EQ(loaded.config.zero_optimization.offload_param.device, "none");
    EXPECT_TRUE(has(all(loaded.warnings), "offload_param has no effect below stage 3")) << all(loaded.warnings);
  }
  const auto c = load_json(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})").config;
  EXPECT_EQ(c.zero_optimization.offload_param.device, "cpu");
}

TEST(DeepSpeedRules, CommunicationDataTypeInAnyCase) {
  const KeyStatus* status = find_key_status("communication_data_type");
  ASSERT_NE(status, nullptr);
  for (const char* spelling : {"FP16", "Bf16", "fp32"}) {
    const std::string text = std::string(R"({"communication_data_type": ")") + spelling + "\"}";
    if (status->state == KeyState::refused) {  // until it is implemented, refused by name, not by spelling
      EXPECT_TRUE(has(usage_error(text), "not supported yet: communication_data_type")) << usage_error(text);
      continue;
    }
    std::string lower = spelling;
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(ch));
    EXPECT_EQ(load_json(text).config.engine.communication_data_type, lower);
  }
  // DeepSpeed's ValueError for anything else; the real-world typo "bfp16" meant bf16.
  const auto e = usage_error(R"({"communication_data_type": "bfp16"})");
  EXPECT_TRUE(has(e, "communication_data_type must be one of")) << e;
  EXPECT_TRUE(has(e, "did you mean 'bf16'")) << e;
}

TEST(DeepSpeedRules, EmptyFileIsInvalidJson) {
  for (const char* text : {"", "   \n\t\n"}) {
    const auto e = usage_error(text);
    EXPECT_TRUE(has(e, "invalid JSON") && has(e, "empty")) << e;
  }
  const std::string path = testing::temp_dir("config_empty") + "/ds_config.json";
  std::ofstream(path) << "\n";
  EXPECT_THROW(load(path, LoadOptions{}), UsageError);
  EXPECT_EQ(load("", LoadOptions{}).config.optimizer.type, "AdamW") << "no file: every default";
}

TEST(DeepSpeedRules, EveryErrorOfAFileIsReportedAtOnce) {
  const auto e = usage_error(R"({
    "gradient_cliping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": "fast"}},
    "zero_optimization": {"stage": 7, "offload_optimizer": {"device": "gpu"}},
    "sequence_parallel_size": 4,
    "xtrain": {"steps": 0}})");
  EXPECT_TRUE(has(e, "6 errors")) << e;
  for (const char* part : {"did you mean 'gradient_clipping'", "optimizer.params.lr must be a number",
                           "zero_optimization.stage must be 0, 1, 2 or 3", "zero_optimization.offload_optimizer.device",
                           "not supported yet: sequence_parallel_size", "xtrain.steps must be > 0"}) {
    EXPECT_TRUE(has(e, part)) << part << " missing from:\n" << e;
  }
}

TEST(DeepSpeedRules, RecognisedOnlyKeysAreRefusedOrAnnounced) {
  EXPECT_TRUE(has(usage_error(R"({"sequence_parallel_size": 4})"), "not supported yet: sequence_parallel_size"));
  EXPECT_TRUE(has(usage_error(R"({"sparse_attention": {"mode": "fixed", "block": 16}})"), "not supported yet: sparse_attention"));
  const auto loaded = load_json(R"({"sequence_parallel_size": 1, "vocabulary_size": 50257, "disable_allgather": false,
                                    "compression_training": {"weight_quantization": {}}})");
  for (const char* key : {"sequence_parallel_size", "vocabulary_size", "disable_allgather", "compression_training"}) {
    EXPECT_TRUE(has(all(loaded.warnings), std::string("config: ") + key + " has no effect here: ")) << key << "\n"
                                                                                                  << all(loaded.warnings);
  }
  EXPECT_EQ(loaded.warnings.size(), 4u) << all(loaded.warnings);
}

// DeepSpeed 0.16: a bare {"fp16": {"enabled": true}} gives the dynamic scaler its class defaults
// (ZeRO: DynamicLossScaler() = 2^32, hysteresis 1; stage 0: FP16_Optimizer, 2^16, no hysteresis);
// naming any scaler key gives the documented defaults (2^16, hysteresis 2) for the rest.
TEST(DeepSpeedRules, Fp16ScalerDefaultsFollowWhetherTheBlockNamesScalerKeys) {
  struct Case { const char* json; double scale; int64_t hysteresis; };
  for (const auto& c : {Case{R"({"fp16": {"enabled": true}, "zero_optimization": {"stage": 2}})", std::ldexp(1.0, 32), 1},
                        Case{R"({"fp16": {"enabled": true}, "zero_optimization": {"stage": 1}})", std::ldexp(1.0, 32), 1},
                        Case{R"({"fp16": {"enabled": true}})", 65536, 1},
                        Case{R"({"fp16": {"enabled": true, "loss_scale": 0}, "zero_optimization": {"stage": 3}})",
                             std::ldexp(1.0, 32), 1},
                        Case{R"({"fp16": {"enabled": true, "loss_scale_window": 500}, "zero_optimization": {"stage": 2}})",
                             65536, 2},
                        Case{R"({"fp16": {"enabled": true, "hysteresis": 4}, "zero_optimization": {"stage": 2}})", 65536, 4},
                        Case{R"({"fp16": {"enabled": true, "initial_scale_power": 12}})", 4096, 2}}) {
    const auto fp16 = load_json(c.json).config.fp16;
    const precision::LossScaler scaler(fp16);
    EXPECT_EQ(scaler.scale(), c.scale) << c.json;
    EXPECT_EQ(fp16.hysteresis, c.hysteresis) << c.json;
    EXPECT_EQ(scaler.hysteresis_left(), c.hysteresis) << c.json;
  }
  // A static scale or fp16 off: nothing changes.
  EXPECT_EQ(load_json(R"({"fp16": {"enabled": true, "loss_scale": 128}})").config.fp16.hysteresis, 2);
  EXPECT_EQ(load_json(R"({"zero_optimization": {"stage": 2}})").config.fp16.initial_scale_power, 16);
}

// A run's resolved config.json (every key at its value) loads again as it was, with no line about
// keys it does not set by choice: a resume prints nothing new.
TEST(DeepSpeedRules, ResolvedConfigReloadsQuietly) {
  for (const char* text : {"{}", R"({"fp16": {"enabled": true}, "zero_optimization": {"stage": 0, "reduce_bucket_size": 0,
                                    "offload_param": {"device": "cpu"}}, "flops_profiler": {"enabled": true, "profile_step": -1},
                                    "bf16": {"loss_scale": 0}, "vocabulary_size": 8})"}) {
    const auto first = load_json(text);
    const std::string resolved = to_json(first.config);
    const auto again = load_json(resolved);
    EXPECT_EQ(all(again.warnings), "") << text;
    EXPECT_EQ(to_json(again.config), resolved) << text;
  }
}

}  // namespace
}  // namespace xtrain::config::deepspeed_rules_test
