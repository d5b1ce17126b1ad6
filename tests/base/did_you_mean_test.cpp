// "Did you mean": the nearest candidate by edit distance, ties ranked by shared letters, then by
// common prefix, so an extra or swapped letter suggests the name it came from.
#include <gtest/gtest.h>

#include "xtrain/base/did_you_mean.h"

namespace xtrain::did_you_mean_test {
namespace {

const std::vector<std::string> kDtypes = {"", "fp16", "bf16", "fp32"};

TEST(DidYouMean, TiesGoToTheNameTheTypoCameFrom) {
  // Each typo is one edit from both fp16 and bf16 (or fp16 and fp32).
  EXPECT_EQ(closest_match("bfp16", kDtypes), "bf16");  // an extra 'p': fp16 would drop the 'b'
  EXPECT_EQ(closest_match("fb16", kDtypes), "bf16");   // swapped letters
  EXPECT_EQ(closest_match("bf61", kDtypes), "bf16");
  EXPECT_EQ(closest_match("fp61", kDtypes), "fp16");
  EXPECT_EQ(closest_match("fpp16", kDtypes), "fp16");
  EXPECT_EQ(closest_match("fp23", kDtypes), "fp32");
}

TEST(DidYouMean, DistanceStillComesFirst) {
  EXPECT_EQ(closest_match("adamw", {"Adam", "AdamW"}), "AdamW");  // case-insensitive exact
  EXPECT_EQ(closest_match("Adma", {"Adam", "AdamW", "Lamb"}), "Adam");
  EXPECT_EQ(closest_match("stgae", {"stage", "overlap_comm"}), "stage");
  EXPECT_EQ(closest_match("WarmupCosine", {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"}), "WarmupCosineLR");
  EXPECT_EQ(closest_match("reduce_bucket_sise", {"allgather_bucket_size", "reduce_bucket_size"}),
            "reduce_bucket_size");
}

TEST(DidYouMean, FarNamesSuggestNothing) {
  EXPECT_EQ(closest_match("cuda_visible_devices", {"communication_data_type", "dump_state"}), std::nullopt);
  EXPECT_EQ(closest_match("bfloat16", kDtypes), std::nullopt);
  EXPECT_EQ(did_you_mean_suffix("bfp16", kDtypes), " (did you mean 'bf16'?)");
  EXPECT_EQ(did_you_mean_suffix("xyz", kDtypes), "");
}

TEST(DidYouMean, EditDistanceCountsTranspositionsAsOne) {
  EXPECT_EQ(edit_distance("fb16", "bf16"), 1);
  EXPECT_EQ(edit_distance("bfp16", "bf16"), 1);
  EXPECT_EQ(edit_distance("bfp16", "fp16"), 1);
  EXPECT_EQ(edit_distance("FP16", "fp16"), 0);
  EXPECT_EQ(edit_distance("", "abc"), 3);
}

}  // namespace
}  // namespace xtrain::did_you_mean_test
