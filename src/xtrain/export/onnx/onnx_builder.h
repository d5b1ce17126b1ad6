// A small writer over ONNX's own protobuf schema (libonnx-dev's onnx::ModelProto): initializers
// from tensors, nodes with attributes, typed graph inputs and outputs with symbolic dims, unique
// names. Design choice: the protobuf types stay inside onnx_builder.cpp (pimpl), so no ONNX or
// protobuf header reaches the rest of the build.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace xtrain::onnx_export {

struct Attr {
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>, std::string> value;
};

// A dimension of a graph input/output: a size, or a symbolic name ("batch").
using Dim = std::variant<int64_t, std::string>;

class OnnxBuilder {
 public:
  OnnxBuilder(const std::string& graph_name, int64_t opset, int64_t ir_version);
  ~OnnxBuilder();
  OnnxBuilder(const OnnxBuilder&) = delete;
  OnnxBuilder& operator=(const OnnxBuilder&) = delete;

  // A constant (float32, int8, uint8, int32, int64, bool); returns its (unique) name.
  std::string initializer(const std::string& hint, const at::Tensor& value);
  std::string scalar(const std::string& hint, float value);       // 0-d float
  std::string ints(const std::string& hint, const std::vector<int64_t>& values);  // 1-D int64
  // A node; returns its first output's name (`outputs` names are made from `hint`).
  std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::string& hint,
                   const std::vector<Attr>& attrs = {});
  // A node with `outputs` outputs (named hint, hint.1, hint.2, ...).
  std::vector<std::string> node_n(const std::string& op, const std::vector<std::string>& inputs,
                                  const std::string& hint, int outputs, const std::vector<Attr>& attrs = {});
  void input(const std::string& name, c10::ScalarType dtype, const std::vector<Dim>& dims);
  void output(const std::string& name, c10::ScalarType dtype, const std::vector<Dim>& dims);
  // Renames a value as a graph output (an Identity node when the name differs).
  void mark_output(const std::string& value, const std::string& name, c10::ScalarType dtype,
                   const std::vector<Dim>& dims);

  int64_t num_nodes() const;
  void save(const std::string& path) const;  // serialised ModelProto; throws on I/O errors

 private:
  std::string unique(const std::string& hint);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xtrain::onnx_export
