// Confusion-matrix scores against hand computation (scikit-learn's conventions, worked by hand
// below: no sklearn on the machine), and the matrix built from label tensors.
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include "xtrain/run/class_metrics.h"

namespace xtrain::class_metrics_test {
namespace {

// Rows are true classes, columns predictions:
//            pred 0  pred 1  pred 2
//   true 0      5       1       0
//   true 1      2       3       1
//   true 2      0       0       0      (class 2 never true, predicted once: it still counts)
// class 0: TP 5, FP 2, FN 1 -> P 5/7, R 5/6, F1 10/13
// class 1: TP 3, FP 1, FN 3 -> P 3/4, R 1/2, F1 6/10
// class 2: TP 0, FP 1, FN 0 -> P 0,   R 0 (0/0), F1 0
// accuracy 8/12; macro-F1 (10/13 + 3/5 + 0) / 3.
TEST(ClassMetrics, FixedConfusionMatchesHandComputation) {
  const std::vector<int64_t> m{5, 1, 0, 2, 3, 1, 0, 0, 0};
  const auto s = class_metrics(m, 3);
  EXPECT_DOUBLE_EQ(s.accuracy, 8.0 / 12.0);
  EXPECT_DOUBLE_EQ(s.precision[0], 5.0 / 7.0);
  EXPECT_DOUBLE_EQ(s.recall[0], 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(s.f1[0], 10.0 / 13.0);
  EXPECT_DOUBLE_EQ(s.precision[1], 0.75);
  EXPECT_DOUBLE_EQ(s.recall[1], 0.5);
  EXPECT_DOUBLE_EQ(s.f1[1], 0.6);
  EXPECT_DOUBLE_EQ(s.f1[2], 0.0);
  EXPECT_DOUBLE_EQ(s.recall[2], 0.0);
  EXPECT_EQ(s.support, (std::vector<int64_t>{6, 6, 0}));
  EXPECT_DOUBLE_EQ(s.macro_f1, (10.0 / 13.0 + 0.6 + 0.0) / 3.0);
}

// A class neither true nor predicted is left out of the macro average (sklearn, labels=None).
TEST(ClassMetrics, AbsentClassIsLeftOutOfTheMacroAverage) {
  const std::vector<int64_t> m{4, 0, 0, 1, 3, 0, 0, 0, 0};  // class 2 absent
  const auto s = class_metrics(m, 3);
  // class 0: F1 8/9; class 1: TP 3, FN 1, FP 0 -> F1 6/7.
  EXPECT_DOUBLE_EQ(s.macro_f1, (8.0 / 9.0 + 6.0 / 7.0) / 2.0);
  EXPECT_DOUBLE_EQ(class_metrics(std::vector<int64_t>(4, 0), 2).macro_f1, 0.0);
}

TEST(ClassMetrics, ConfusionFromLabelTensors) {
  std::vector<int64_t> m;
  int64_t classes = 0;
  add_to_confusion(m, classes, at::tensor({0, 0, 1, 2, 2}, at::kLong), at::tensor({0, 1, 1, 0, 2}, at::kLong), 3);
  add_to_confusion(m, classes, at::tensor({1}, at::kLong), at::tensor({2}, at::kLong), 3);
  EXPECT_EQ(classes, 3);
  EXPECT_EQ(m, (std::vector<int64_t>{1, 1, 0, 0, 1, 1, 1, 0, 1}));
}

TEST(ClassMetrics, TableAndJsonNameTheClasses) {
  const std::vector<int64_t> m{5, 1, 2, 3};
  const auto table = confusion_table(m, 2, {"ham", "spam"});
  EXPECT_NE(table.find("ham"), std::string::npos) << table;
  EXPECT_NE(table.find("0.833"), std::string::npos) << table;  // ham recall 5/6
  EXPECT_EQ(confusion_json(m, 2, {"ham", "spam"}),
            "{\"f1\":[0.7692307692307693,0.6666666666666666],\"labels\":[\"ham\",\"spam\"],\"matrix\":[[5,1],[2,3]]}");
  EXPECT_NE(confusion_table(m, 2, {}).find(" 1"), std::string::npos);  // numbered when unnamed
}

}  // namespace
}  // namespace xtrain::class_metrics_test
