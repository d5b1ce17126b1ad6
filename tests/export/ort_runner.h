// Helpers for the export tests: run an ONNX file with ONNX Runtime (node + onnxruntime-node,
// tests/export/ort/run.js) on one input and read its output back as a tensor; check a file with
// onnx.checker (full_check) through /usr/bin/python3. Header-only: the test glob takes *_test.cpp.
#pragma once
#include <ATen/Functions.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "support/paths.h"

namespace xtrain::testing {

// Empty when ONNX Runtime can run here, else why not (the test then skips).
inline std::string ort_unavailable() {
  const auto dir = source_dir() + "/tests/export/ort/node_modules/onnxruntime-node";
  if (!std::filesystem::exists(dir)) return "onnxruntime-node is not installed (scripts/lib.sh install_export_node_modules)";
  if (run_command("node --version") != 0) return "node is not on PATH";
  return "";
}

struct OrtRun {
  at::Tensor output;          // float32, the shape ONNX Runtime reported
  double latency_ms = 0.0;    // median of `repeats` timed runs (0 when repeats == 0)
};

// `input`: float32 or int64. Throws (gtest failure + empty output) when node fails.
inline OrtRun run_onnx_runtime(const std::string& model, const at::Tensor& input, const std::string& input_name,
                               const std::string& output_name, const std::string& dir, int repeats = 0,
                               int threads = 1, const std::string& optimization = "all") {
  const auto x = input.contiguous();
  const std::string in_file = dir + "/ort_input.bin", out_file = dir + "/ort_output.bin", spec_file = dir + "/spec.json";
  {
    std::ofstream f(in_file, std::ios::binary);
    f.write(static_cast<const char*>(x.data_ptr()), static_cast<std::streamsize>(x.numel() * x.element_size()));
  }
  nlohmann::json spec;
  spec["model"] = model;
  spec["input"] = {{"name", input_name}, {"file", in_file},
                   {"dtype", x.scalar_type() == at::kLong ? "int64" : "float32"}, {"dims", x.sizes().vec()}};
  spec["output"] = {{"name", output_name}, {"file", out_file}};
  spec["repeats"] = repeats;
  spec["threads"] = threads;
  spec["optimization"] = optimization;  // onnxruntime graphOptimizationLevel: disabled | basic | extended | all
  std::ofstream(spec_file) << spec.dump();
  std::string out;
  const int rc = run_command("node " + source_dir() + "/tests/export/ort/run.js " + spec_file, &out);
  OrtRun r;
  if (rc != 0) {
    ADD_FAILURE() << "onnxruntime failed on " << model << ":\n" << out;
    return r;
  }
  const auto line = nlohmann::json::parse(out.substr(out.rfind('{')));
  std::ifstream f(out_file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto dims = line.at("dims").get<std::vector<int64_t>>();
  r.output = at::empty(dims, at::kFloat);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), r.output.numel() * 4) << "output bytes of " << model;
  std::memcpy(r.output.data_ptr(), bytes.data(), std::min<size_t>(bytes.size(), r.output.numel() * 4));
  if (!line.at("latency_ms").is_null()) r.latency_ms = line.at("latency_ms").get<double>();
  return r;
}

// onnx.checker.check_model(full_check=True); returns its output ("ok ir_version=8 opset=17 ...").
inline std::string check_onnx(const std::string& model) {
  std::string out;
  const int rc = run_command("/usr/bin/python3 " + source_dir() + "/tests/export/check_onnx.py " + model, &out);
  EXPECT_EQ(rc, 0) << "onnx.checker rejected " << model << ":\n" << out;
  return out;
}

}  // namespace xtrain::testing
