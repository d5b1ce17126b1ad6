// Helpers for the models/ parity tests: load reference weights into a module by parameter name
// (every name must be present and none left over), and the deterministic parameter rule shared
// with tests/reference/gen_resnet.py (`rule_value` there; keep the two identical).
#pragma once
#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <map>
#include <set>
#include <string>

namespace xtrain::testing {

// The entries of `fixture` whose key starts with `prefix`, with the prefix removed.
inline std::map<std::string, at::Tensor> with_prefix(const std::map<std::string, at::Tensor>& fixture,
                                                     const std::string& prefix) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [key, value] : fixture) {
    if (key.rfind(prefix, 0) == 0) out[key.substr(prefix.size())] = value;
  }
  return out;
}

// Copies weights[name] into each parameter; fails on a missing, extra or mis-shaped name.
inline void load_parameters(torch::nn::Module& module, const std::map<std::string, at::Tensor>& weights) {
  at::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& p : module.named_parameters()) {
    auto it = weights.find(p.key());
    if (it == weights.end()) {
      ADD_FAILURE() << "reference has no parameter " << p.key();
      continue;
    }
    ASSERT_EQ(p.value().sizes(), it->second.sizes()) << p.key();
    p.value().copy_(it->second);
    used.insert(p.key());
  }
  for (const auto& kv : weights) {
    if (!used.count(kv.first)) ADD_FAILURE() << "module has no parameter " << kv.first << " (in the reference)";
  }
}

// offset + amp·(2u - 1), u = frac(sin(12.9898·i + phase)·43758.5453), phase = 0.1·(Σ bytes of
// name mod 61), in float64 and rounded to float32: the same torch ops as gen_resnet.py.
inline at::Tensor rule_value(const std::string& name, at::IntArrayRef shape, double amp, double offset) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  int64_t bytes = 0;
  for (unsigned char c : name) bytes += c;
  const double phase = 0.1 * static_cast<double>(bytes % 61);
  const auto s = (at::arange(n, at::kDouble) * 12.9898 + phase).sin() * 43758.5453;
  const auto u = s - s.floor();
  return ((2 * u - 1) * amp + offset).to(at::kFloat).reshape(shape);
}

}  // namespace xtrain::testing
