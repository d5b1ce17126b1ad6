// OnnxBuilder over onnx::ModelProto (onnx-ml.pb.h: the generated classes, namespace onnx).
#include "xtrain/export/onnx/onnx_builder.h"

// libonnx-dev ships only the ONNX-ML schema; onnx_pb.h picks it with ONNX_ML and defines ONNX_API.
// Defined here, in this one translation unit, so the shared PCH's definitions stay the same.
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#include <onnx/onnx_pb.h>

#include <fstream>
#include <map>

#include "xtrain/base/error.h"

namespace xtrain::onnx_export {

namespace {

int32_t onnx_type(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return onnx::TensorProto::FLOAT;
    case at::kChar: return onnx::TensorProto::INT8;
    case at::kByte: return onnx::TensorProto::UINT8;
    case at::kInt: return onnx::TensorProto::INT32;
    case at::kLong: return onnx::TensorProto::INT64;
    case at::kBool: return onnx::TensorProto::BOOL;
    default: TORCH_CHECK(false, "export: no ONNX element type for ", t);
  }
}

void set_dims(onnx::ValueInfoProto* v, c10::ScalarType dtype, const std::vector<Dim>& dims) {
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type(dtype));
  auto* shape = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (const auto* n = std::get_if<int64_t>(&d)) {
      dim->set_dim_value(*n);
    } else {
      dim->set_dim_param(std::get<std::string>(d));
    }
  }
}

}  // namespace

struct OnnxBuilder::Impl {
  onnx::ModelProto model;
  onnx::GraphProto* graph = nullptr;
  std::map<std::string, int> used;
};

OnnxBuilder::OnnxBuilder(const std::string& graph_name, int64_t opset, int64_t ir_version)
    : impl_(std::make_unique<Impl>()) {
  auto& m = impl_->model;
  m.set_ir_version(ir_version);
  m.set_producer_name("xtrain");
  m.set_producer_version("1");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  impl_->graph = m.mutable_graph();
  impl_->graph->set_name(graph_name);
}

OnnxBuilder::~OnnxBuilder() = default;

std::string OnnxBuilder::unique(const std::string& hint) {
  const int n = impl_->used[hint]++;
  return n == 0 ? hint : hint + "_" + std::to_string(n);
}

std::string OnnxBuilder::initializer(const std::string& hint, const at::Tensor& value) {
  const auto t = value.detach().contiguous();
  auto* init = impl_->graph->add_initializer();
  const std::string name = unique(hint);
  init->set_name(name);
  init->set_data_type(onnx_type(t.scalar_type()));
  for (int64_t d : t.sizes()) init->add_dims(d);
  init->set_raw_data(std::string(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size()));
  return name;
}

std::string OnnxBuilder::scalar(const std::string& hint, float value) {
  return initializer(hint, at::full({}, value, at::kFloat));
}

std::string OnnxBuilder::ints(const std::string& hint, const std::vector<int64_t>& values) {
  return initializer(hint, at::tensor(values, at::kLong));
}

std::string OnnxBuilder::node(const std::string& op, const std::vector<std::string>& inputs, const std::string& hint,
                              const std::vector<Attr>& attrs) {
  return node_n(op, inputs, hint, 1, attrs)[0];
}

std::vector<std::string> OnnxBuilder::node_n(const std::string& op, const std::vector<std::string>& inputs,
                                             const std::string& hint, int outputs, const std::vector<Attr>& attrs) {
  auto* n = impl_->graph->add_node();
  n->set_op_type(op);
  const std::string out = unique(hint);
  n->set_name(out);
  for (const auto& i : inputs) n->add_input(i);
  std::vector<std::string> names;
  for (int k = 0; k < outputs; ++k) {
    names.push_back(k == 0 ? out : unique(out + "." + std::to_string(k)));
    n->add_output(names.back());
  }
  for (const auto& a : attrs) {
    auto* p = n->add_attribute();
    p->set_name(a.name);
    if (const auto* i = std::get_if<int64_t>(&a.value)) {
      p->set_type(onnx::AttributeProto::INT), p->set_i(*i);
    } else if (const auto* f = std::get_if<float>(&a.value)) {
      p->set_type(onnx::AttributeProto::FLOAT), p->set_f(*f);
    } else if (const auto* v = std::get_if<std::vector<int64_t>>(&a.value)) {
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t x : *v) p->add_ints(x);
    } else {
      p->set_type(onnx::AttributeProto::STRING), p->set_s(std::get<std::string>(a.value));
    }
  }
  return names;
}

void OnnxBuilder::input(const std::string& name, c10::ScalarType dtype, const std::vector<Dim>& dims) {
  impl_->used[name]++;
  set_dims(impl_->graph->add_input(), dtype, dims);
  impl_->graph->mutable_input()->rbegin()->set_name(name);
}

void OnnxBuilder::output(const std::string& name, c10::ScalarType dtype, const std::vector<Dim>& dims) {
  set_dims(impl_->graph->add_output(), dtype, dims);
  impl_->graph->mutable_output()->rbegin()->set_name(name);
}

void OnnxBuilder::mark_output(const std::string& value, const std::string& name, c10::ScalarType dtype,
                              const std::vector<Dim>& dims) {
  std::string out = value;
  if (value != name) {
    auto* n = impl_->graph->add_node();
    n->set_op_type("Identity");
    n->set_name(name);
    n->add_input(value);
    n->add_output(name);
    out = name;
  }
  output(out, dtype, dims);
}

int64_t OnnxBuilder::num_nodes() const { return impl_->graph->node_size(); }

void OnnxBuilder::save(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  XTRAIN_USAGE_CHECK(out.good(), "export: cannot write ", path);
  TORCH_CHECK(impl_->model.SerializeToOstream(&out) && out.good(), "export: writing ", path, " failed");
}

}  // namespace xtrain::onnx_export
