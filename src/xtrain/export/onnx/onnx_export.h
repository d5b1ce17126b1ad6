// export_onnx: a traced model (compress::Graph), float or with a converted QuantPlan (QDQ int8),
// to an ONNX file: opset 17, IR version 8, batch a symbolic dimension (and, for a GPT with dense
// attention, the sequence length too; a ViT's image size is fixed). Checked by onnx.checker
// (full_check) and run by ONNX Runtime in tests/export. A layer without an emitter cannot reach
// here: trace() already names it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/compress/graph/graph.h"

namespace xtrain::compress {
class QuantPlan;
}

namespace xtrain::onnx_export {

struct ExportOptions {
  int64_t opset = 17;
  int64_t ir_version = 8;
  std::string graph_name = "xtrain";
  bool int8 = false;  // needs a converted plan
};

struct ExportReport {
  std::string path;
  int64_t nodes = 0;
  int64_t file_bytes = 0;
  int64_t quantized_layers = 0;
  std::string input_name, output_name;
  std::vector<std::string> input_dims;  // e.g. {"batch", "1", "28", "28"}
};

ExportReport export_onnx(const compress::Graph& graph, const compress::QuantPlan* plan, const std::string& path,
                         const ExportOptions& options = {});

}  // namespace xtrain::onnx_export
