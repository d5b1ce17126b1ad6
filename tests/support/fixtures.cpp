#include "support/fixtures.h"

#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <torch/serialize.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "support/paths.h"

namespace xtrain::testing {

std::map<std::string, at::Tensor> load_tensors(const std::string& name) {
  const std::string path = fixture(name);
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) throw std::runtime_error("missing fixture " + path + " (regenerate with tests/reference/gen_*.py)");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto dict = torch::pickle_load(bytes).toGenericDict();
  std::map<std::string, at::Tensor> out;
  for (const auto& kv : dict) out[kv.key().toStringRef()] = kv.value().toTensor();
  return out;
}

namespace {
std::string index_string(int64_t flat, at::IntArrayRef shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < idx.size(); ++i) s << (i ? "," : "") << idx[i];
  s << "]";
  return s.str();
}
}  // namespace

bool expect_close(const at::Tensor& actual, const at::Tensor& expected, double rtol, double atol,
                  const std::string& what) {
  if (actual.sizes() != expected.sizes()) {
    ADD_FAILURE() << what << ": shape " << actual.sizes() << " != expected " << expected.sizes();
    return false;
  }
  if (actual.numel() == 0) return true;
  auto a = actual.detach().to(at::kDouble).contiguous().reshape({-1});
  auto e = expected.detach().to(at::kDouble).contiguous().reshape({-1});
  auto err = (a - e).abs();
  auto allowed = e.abs() * rtol + atol;
  auto excess = err - allowed;
  // NaN anywhere counts as a failure.
  auto bad = excess.gt(0).logical_or(a.isnan().logical_xor(e.isnan()));
  if (!bad.any().item<bool>()) return true;
  const int64_t where = excess.nan_to_num(1e300).argmax().item<int64_t>();
  ADD_FAILURE() << what << ": " << bad.sum().item<int64_t>() << " of " << a.numel()
                << " elements differ; largest excess at " << index_string(where, actual.sizes())
                << ": actual " << a[where].item<double>() << " expected " << e[where].item<double>()
                << " (|err| " << err[where].item<double>() << ", rtol " << rtol << ", atol " << atol << ")";
  return false;
}

bool expect_equal(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  if (actual.scalar_type() != expected.scalar_type() || actual.sizes() != expected.sizes()) {
    ADD_FAILURE() << what << ": " << actual.scalar_type() << actual.sizes() << " vs " << expected.scalar_type()
                  << expected.sizes();
    return false;
  }
  if (at::equal(actual, expected)) return true;
  return expect_close(actual, expected, 0, 0, what + " (not bit-identical)");
}

}  // namespace xtrain::testing
