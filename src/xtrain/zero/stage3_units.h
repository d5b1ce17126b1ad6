// Stage 3's units (shared/design/zero.md, "Stage 3 without module hooks"): which submodules are
// gathered as one (plan_units), and the wrappers that route their forward through the strategy
// (UnitWrappers): models that call their blocks through nn::UnitRouted are wrapped at that call, the
// children of every torch::nn::Sequential are replaced in place (and restored by ~UnitWrappers).
// Every wrapper and every autograd function reaches the strategy through a std::weak_ptr<UnitEvents>
// the strategy owns: once it is gone, wrappers pass through and backward hooks do nothing.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "xtrain/zero/flat_layout.h"

namespace torch::nn {
class Module;
class AnyModule;
}

namespace xtrain::zero {

using UnitFn = std::function<at::Tensor(const at::Tensor&)>;

class UnitEvents {
 public:
  virtual ~UnitEvents() = default;
  // Unit u's forward: `inner` runs with u's parameters gathered.
  virtual at::Tensor run_unit(size_t u, const UnitFn& inner, const at::Tensor& x) = 0;
  virtual void on_pre_backward(size_t u) = 0;   // the gradient reached unit u's outputs
  virtual void on_post_backward(size_t u) = 0;  // unit u's backward is done
};

// Identities whose backward reports to `events`: on a unit's input (its backward runs once the
// unit's backward is done: on_post_backward) and on its output (before the gradient enters the
// unit: on_pre_backward). Their outputs are copies, not views, so a module may modify them in place.
at::Tensor unit_input(const at::Tensor& x, const std::weak_ptr<UnitEvents>& events, size_t unit);
at::Tensor unit_output(const at::Tensor& y, const std::weak_ptr<UnitEvents>& events, size_t unit);

struct UnitPlan {
  NamedParams ordered;        // layout order: each partitioned unit's parameters, then the persistent ones
  std::vector<int> unit_of;   // per ordered parameter: its unit (persistent ones in reduce buckets)
  size_t partitioned = 0;     // units [0, partitioned) are partitioned
  std::vector<std::shared_ptr<torch::nn::Module>> modules;  // of the partitioned units
  std::vector<char> routed;   // per partitioned unit: called through nn::UnitRouted
};

// Units: routed submodules first (in call order), then the children of every Sequential. A module is
// a unit when none of its parameters belongs to an earlier unit and some have more than
// `persistence_threshold` elements (those are partitioned; the rest stay whole).
UnitPlan plan_units(const NamedParams& params, const std::shared_ptr<torch::nn::Module>& module,
                    int64_t persistence_threshold, int64_t reduce_bucket_size);

class UnitWrappers {
 public:
  UnitWrappers(const std::shared_ptr<torch::nn::Module>& module, const UnitPlan& plan, std::weak_ptr<UnitEvents> events);
  ~UnitWrappers();  // the Sequentials get their children back
  UnitWrappers(const UnitWrappers&) = delete;
  UnitWrappers& operator=(const UnitWrappers&) = delete;

 private:
  void wrap_routed(const std::shared_ptr<torch::nn::Module>& module, const UnitPlan& plan);
  void wrap_sequentials(const std::shared_ptr<torch::nn::Module>& module, const UnitPlan& plan);

  std::weak_ptr<UnitEvents> events_;
  std::vector<std::pair<std::shared_ptr<torch::nn::Module>, std::vector<torch::nn::AnyModule>>> wrapped_;
};

}  // namespace xtrain::zero
