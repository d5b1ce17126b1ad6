// Modules whose repeated submodules (transformer blocks) run through a replaceable function, so a
// wrapper can run code around each call — activation checkpointing, ZeRO stage 3's gather and
// release — without forward hooks, which LibTorch modules do not have. Children of a
// torch::nn::Sequential need no cooperation: Sequential's forward goes through its AnyModule
// entries, which can be wrapped in place.
#pragma once
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace xtrain::nn {

class UnitRouted {
 public:
  using UnitFn = std::function<at::Tensor(const at::Tensor&)>;
  // Runs unit i on x; `inner` runs the unit as it ran before this wrapper (its forward or an
  // earlier wrapper). `inner` is valid for the duration of the call only.
  using Wrapper = std::function<at::Tensor(int64_t i, torch::nn::Module& unit, const UnitFn& inner, const at::Tensor& x)>;

  virtual ~UnitRouted() = default;
  // The units, in the order forward calls them (index i of the wrapper).
  virtual std::vector<std::shared_ptr<torch::nn::Module>> routed_units() const = 0;
  // Adds `outer` around every later unit call.
  virtual void wrap_units(Wrapper outer) = 0;
};

}  // namespace xtrain::nn
