#include "xtrain/zero/flat_layout.h"

#include <ATen/Functions.h>

#include <unordered_set>

#include "xtrain/base/error.h"

namespace xtrain::zero {

std::vector<optim::Segment> FlatLayout::segments(int64_t begin, int64_t end) const {
  std::vector<optim::Segment> out;
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    const int64_t a = std::max(begin, s.offset), b = std::min(end, s.offset + s.numel);
    if (a < b) out.push_back({a, b - a, s.group, static_cast<int64_t>(i)});
  }
  return out;
}

const ParamSlot& FlatLayout::slot(const std::string& name) const {
  for (const auto& s : slots) {
    if (s.name == name) return s;
  }
  TORCH_CHECK(false, "zero: no parameter named ", name, " in the flat layout");
}

FlatLayout make_layout(const NamedParams& params, const std::vector<int>& group, int64_t world_size,
                       int64_t alignment) {
  TORCH_INTERNAL_ASSERT(world_size > 0 && alignment > 0);
  TORCH_INTERNAL_ASSERT(group.empty() || group.size() == params.size());
  FlatLayout layout;
  layout.world_size = world_size;
  layout.alignment = alignment;
  int64_t offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, t] = params[i];
    ParamSlot slot;
    slot.name = name;
    slot.shape = t.sizes().vec();
    slot.numel = t.numel();
    slot.offset = offset;
    slot.group = group.empty() ? 0 : group[i];
    offset += slot.numel;
    layout.slots.push_back(std::move(slot));
  }
  layout.used = offset;
  const int64_t quantum = world_size * alignment;
  layout.numel = std::max<int64_t>(quantum, (offset + quantum - 1) / quantum * quantum);
  return layout;
}

void bind_params(const NamedParams& params, const FlatLayout& layout, const at::Tensor& flat) {
  TORCH_INTERNAL_ASSERT(flat.dim() == 1 && flat.numel() == layout.numel && flat.is_contiguous());
  TORCH_INTERNAL_ASSERT(params.size() == layout.slots.size());
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& slot = layout.slots[i];
    auto view = flat.narrow(0, slot.offset, slot.numel).view(slot.shape);
    view.copy_(params[i].second);
    params[i].second.set_data(view);
  }
}

void bind_grads(const NamedParams& params, const FlatLayout& layout, const at::Tensor& flat_grads) {
  TORCH_INTERNAL_ASSERT(flat_grads.dim() == 1 && flat_grads.numel() == layout.numel);
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& slot = layout.slots[i];
    auto p = params[i].second;
    p.mutable_grad() = flat_grads.narrow(0, slot.offset, slot.numel).view(slot.shape);
  }
}

NamedParams unique_trainable(const NamedParams& params) {
  NamedParams out;
  std::unordered_set<const void*> seen;
  for (const auto& [name, t] : params) {
    if (!t.defined() || !t.requires_grad()) continue;
    if (!seen.insert(t.unsafeGetTensorImpl()).second) continue;
    out.emplace_back(name, t);
  }
  return out;
}

}  // namespace xtrain::zero
