// The export tests' common step: export a traced graph (float, or int8 with a converted plan), check
// the file with onnx.checker, and run it in ONNX Runtime on one input. Header-only beside
// ort_runner.h (the test glob takes *_test.cpp).
#pragma once
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <string>

#include "export/ort_runner.h"
#include "support/paths.h"
#include "xtrain/export/onnx/onnx_export.h"

namespace xtrain::onnx_export::test_support {

struct Exported {
  ExportReport report;
  at::Tensor ort;  // ONNX Runtime's output for the input
};

// `tag` names the scratch folder; `optimization` is ONNX Runtime's graph optimization level.
inline Exported export_and_run(const compress::Graph& g, const compress::QuantPlan* plan, const at::Tensor& x,
                               const std::string& tag, bool int8, const std::string& optimization = "all") {
  const auto dir = testing::temp_dir("onnx_" + tag);
  ExportOptions o;
  o.int8 = int8;
  Exported e;
  e.report = export_onnx(g, plan, dir + "/model.onnx", o);
  const auto checked = testing::check_onnx(e.report.path);
  EXPECT_NE(checked.find("ok ir_version=8 opset=17"), std::string::npos) << checked;
  e.ort = testing::run_onnx_runtime(e.report.path, x, e.report.input_name, e.report.output_name, dir, 0, 1,
                                    optimization).output;
  return e;
}

}  // namespace xtrain::onnx_export::test_support
