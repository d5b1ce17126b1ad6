#include "xtrain/zero/stage3_units.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include <algorithm>
#include <unordered_map>

#include "xtrain/nn/unit_router.h"
#include "xtrain/zero/shard_layout.h"

namespace xtrain::zero {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What a unit boundary's backward reports, and to whom.
struct UnitMark : torch::CustomClassHolder {
  UnitMark(std::weak_ptr<UnitEvents> e, size_t u, bool post) : events(std::move(e)), unit(u), post_backward(post) {}
  std::weak_ptr<UnitEvents> events;
  size_t unit;
  bool post_backward;  // true: on_post_backward (on the unit's input); false: on_pre_backward (its output)
};

struct UnitBoundary : torch::autograd::Function<UnitBoundary> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, c10::intrusive_ptr<UnitMark> mark) {
    ctx->saved_data["mark"] = c10::IValue::make_capsule(std::move(mark));
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto mark = c10::static_intrusive_pointer_cast<UnitMark>(ctx->saved_data["mark"].toCapsule());
    if (auto events = mark->events.lock()) {
      if (mark->post_backward) {
        events->on_post_backward(mark->unit);
      } else {
        events->on_pre_backward(mark->unit);
      }
    }
    return {grads[0], at::Tensor()};
  }
};

// Stands in for a Sequential child: the child runs as unit `unit` of the strategy.
class ZeroUnitImpl : public torch::nn::Module {
 public:
  ZeroUnitImpl(torch::nn::AnyModule inner, std::weak_ptr<UnitEvents> events, size_t unit)
      : inner_(std::move(inner)), events_(std::move(events)), unit_(unit) {}
  at::Tensor forward(const at::Tensor& x) {
    const auto call = [this](const at::Tensor& in) { return inner_.forward<at::Tensor>(in); };
    auto events = events_.lock();
    return events ? events->run_unit(unit_, call, x) : call(x);
  }

 private:
  torch::nn::AnyModule inner_;
  std::weak_ptr<UnitEvents> events_;
  size_t unit_;
};

const void* key(const at::Tensor& t) { return t.unsafeGetTensorImpl(); }

// The unit-finding walk of plan_units: parameter indices per unit, in the order found.
struct UnitFinder {
  const NamedParams& params;
  int64_t threshold;
  std::unordered_map<const void*, size_t> index;
  std::vector<int> unit_of_param;
  std::vector<std::vector<size_t>> unit_params;  // partitioned parameters of each unit
  UnitPlan& plan;

  UnitFinder(const NamedParams& p, int64_t t, UnitPlan& out) : params(p), threshold(t), plan(out) {
    for (size_t i = 0; i < params.size(); ++i) index[key(params[i].second)] = i;
    unit_of_param.assign(params.size(), -1);
  }
  bool try_unit(const std::shared_ptr<torch::nn::Module>& m) {
    std::vector<size_t> mine, big;
    for (const auto& p : m->parameters(/*recurse=*/true)) {
      auto it = index.find(key(p));
      if (it == index.end()) continue;  // frozen
      if (unit_of_param[it->second] != -1) return false;
      mine.push_back(it->second);
    }
    for (size_t i : mine) {
      if (params[i].second.numel() > threshold) big.push_back(i);
    }
    if (big.empty()) return false;
    std::sort(big.begin(), big.end());
    for (size_t i : big) unit_of_param[i] = static_cast<int>(unit_params.size());
    unit_params.push_back(std::move(big));
    plan.modules.push_back(m);
    return true;
  }
  void find(const std::shared_ptr<torch::nn::Module>& module) {
    if (auto* routed = dynamic_cast<nn::UnitRouted*>(module.get())) {
      for (const auto& m : routed->routed_units()) try_unit(m);
    }
    plan.routed.assign(plan.modules.size(), 1);
    for (const auto& m : module->modules(/*include_self=*/true)) {
      auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(m.get());
      if (!seq) continue;
      for (auto& any : *seq) {
        if (try_unit(any.ptr())) plan.routed.push_back(0);
      }
    }
  }
};

}  // namespace

at::Tensor unit_input(const at::Tensor& x, const std::weak_ptr<UnitEvents>& events, size_t unit) {
  return UnitBoundary::apply(x, c10::make_intrusive<UnitMark>(events, unit, true));
}

at::Tensor unit_output(const at::Tensor& y, const std::weak_ptr<UnitEvents>& events, size_t unit) {
  return UnitBoundary::apply(y, c10::make_intrusive<UnitMark>(events, unit, false));
}

UnitPlan plan_units(const NamedParams& params, const std::shared_ptr<torch::nn::Module>& module,
                    int64_t persistence_threshold, int64_t reduce_bucket_size) {
  UnitPlan plan;
  UnitFinder finder(params, persistence_threshold, plan);
  if (module) finder.find(module);
  plan.partitioned = finder.unit_params.size();
  for (size_t u = 0; u < plan.partitioned; ++u) {
    for (size_t i : finder.unit_params[u]) {
      plan.ordered.push_back(params[i]);
      plan.unit_of.push_back(static_cast<int>(u));
    }
  }
  NamedParams persistent;
  for (size_t i = 0; i < params.size(); ++i) {
    if (finder.unit_of_param[i] == -1) persistent.push_back(params[i]);
  }
  if (!persistent.empty()) {
    for (int b : units_by_size(persistent, reduce_bucket_size)) {
      plan.unit_of.push_back(static_cast<int>(plan.partitioned) + b);
    }
    plan.ordered.insert(plan.ordered.end(), persistent.begin(), persistent.end());
  }
  return plan;
}

UnitWrappers::UnitWrappers(const std::shared_ptr<torch::nn::Module>& module, const UnitPlan& plan,
                           std::weak_ptr<UnitEvents> events)
    : events_(std::move(events)) {
  if (!module) return;
  wrap_routed(module, plan);
  wrap_sequentials(module, plan);
}

UnitWrappers::~UnitWrappers() {
  for (auto& [m, original] : wrapped_) {
    auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(m.get());
    size_t i = 0;
    for (auto& any : *seq) any = original[i++];
  }
}

void UnitWrappers::wrap_routed(const std::shared_ptr<torch::nn::Module>& module, const UnitPlan& plan) {
  auto* routed = dynamic_cast<nn::UnitRouted*>(module.get());
  if (!routed) return;
  std::unordered_map<const torch::nn::Module*, size_t> unit_of_module;
  for (size_t u = 0; u < plan.partitioned; ++u) {
    if (plan.routed[u]) unit_of_module[plan.modules[u].get()] = u;
  }
  if (unit_of_module.empty()) return;
  routed->wrap_units([events = events_, unit_of_module](int64_t, torch::nn::Module& m, const nn::UnitRouted::UnitFn& inner,
                                                        const at::Tensor& x) {
    auto it = unit_of_module.find(&m);
    auto owner = events.lock();
    if (!owner || it == unit_of_module.end()) return inner(x);
    return owner->run_unit(it->second, inner, x);
  });
}

void UnitWrappers::wrap_sequentials(const std::shared_ptr<torch::nn::Module>& module, const UnitPlan& plan) {
  std::unordered_map<const torch::nn::Module*, size_t> seq_unit;
  for (size_t u = 0; u < plan.partitioned; ++u) {
    if (!plan.routed[u]) seq_unit[plan.modules[u].get()] = u;
  }
  for (const auto& m : module->modules(/*include_self=*/true)) {
    auto* seq = dynamic_cast<torch::nn::SequentialImpl*>(m.get());
    if (!seq) continue;
    std::vector<torch::nn::AnyModule> original;
    bool changed = false;
    for (auto& any : *seq) {
      original.push_back(any);
      auto it = seq_unit.find(any.ptr().get());
      if (it == seq_unit.end()) continue;
      any = torch::nn::AnyModule(std::make_shared<ZeroUnitImpl>(any, events_, it->second));
      changed = true;
    }
    if (changed) wrapped_.emplace_back(m, std::move(original));
  }
}

}  // namespace xtrain::zero
