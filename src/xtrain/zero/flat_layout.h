// Flat buffers: every trainable parameter gets a fixed slot in one 1-D buffer, padded so the total
// divides evenly into `world_size` partitions of a multiple of `alignment` elements. Rank r owns
// [r·P, (r+1)·P). Parameters become views into the buffer (set_data) and their .grad views into a
// gradient buffer, so optimizers and collectives run over contiguous memory. Pure arithmetic here
// plus the binding; see shared/design/zero.md.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "xtrain/optim/optimizer.h"

namespace xtrain::zero {

using NamedParams = std::vector<std::pair<std::string, at::Tensor>>;

struct ParamSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t offset = 0;  // into the flat buffer
  int group = 0;       // optimizer group: 0 = with weight decay, 1 = without
};

struct FlatLayout {
  std::vector<ParamSlot> slots;
  int64_t numel = 0;  // padded total
  int64_t used = 0;   // sum of parameter sizes (numel - padding)
  int64_t world_size = 1;
  int64_t alignment = 1;

  int64_t partition_numel() const { return numel / world_size; }
  int64_t partition_begin(int64_t rank) const { return rank * partition_numel(); }
  // Optimizer segments for the part of each parameter inside [begin, end).
  std::vector<optim::Segment> segments(int64_t begin, int64_t end) const;
  const ParamSlot& slot(const std::string& name) const;
};

// Slots in the given order; `group[i]` is parameter i's parameter group (empty: all in group 0).
FlatLayout make_layout(const NamedParams& params, const std::vector<int>& group, int64_t world_size,
                       int64_t alignment);

// Copies each parameter's current values into `flat`, then makes the parameter a view of its
// slot (set_data). `flat` must have layout.numel elements and the parameters' dtype.
void bind_params(const NamedParams& params, const FlatLayout& layout, const at::Tensor& flat);
// Makes each parameter's .grad a view of its slot in `flat_grads` (autograd then accumulates in
// place: AccumulateGrad adds into an existing .grad when grad mode is off during backward).
void bind_grads(const NamedParams& params, const FlatLayout& layout, const at::Tensor& flat_grads);

// Unique trainable parameters of named tensors (shared tensors listed once, first name wins).
NamedParams unique_trainable(const NamedParams& params);

}  // namespace xtrain::zero
