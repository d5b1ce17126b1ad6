// Reference fixtures and element-wise comparison. Fixtures are written by committed generators
// (tests/reference/gen_*.py, run with /usr/bin/python3 and python3-torch 1.13.1) as torch.save'd
// dicts of tensors; `expect_close` reports the largest error and where it is (STYLE.md rule 14).
#pragma once
#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace xtrain::testing {

// Reads tests/reference/fixtures/<name> (a dict of str -> tensor saved by torch.save).
std::map<std::string, at::Tensor> load_tensors(const std::string& name);

// Element-wise |a - b| <= atol + rtol * |b|; on failure a gtest failure names `what`, the largest
// error, its index and both values. Shapes must match exactly. Returns true when close.
bool expect_close(const at::Tensor& actual, const at::Tensor& expected, double rtol, double atol,
                  const std::string& what);
// Bit-identical (same dtype, shape and bytes).
bool expect_equal(const at::Tensor& actual, const at::Tensor& expected, const std::string& what);

}  // namespace xtrain::testing
