// Checkpoints of optimizer state that is not one fp32 value per element (8-bit Adam: int8/uint8
// codes and one fp32 absmax per block of 2048 values, optim/adam8bit.h). Such state cannot be cut
// by parameter as shard_io.h cuts the fp32 moments, so each rank saves its state whole and as it
// is (the codes and absmax bytes) in optimizer_state_rank_<r>.pt, with a "layout" tensor: the
// world size, the rank's buffer length and each fragment it holds (slot, start, numel, local).
// A load restores the bytes exactly when this run's layout is the same (same model, ZeRO stage,
// data-parallel size and bucket sizes); any other layout is refused naming what differs and what
// to do (resharding 8-bit state is not supported yet). The master weights go through shard_io.h.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "xtrain/zero/shard_io.h"
#include "xtrain/zero/shard_layout.h"

namespace xtrain::zero {

std::string whole_state_file(int64_t rank);

// True when some tensor of `state` (optimizer state only, no "master") is not fp32 of `numel`.
bool is_whole_state(const NamedBuffers& state, int64_t numel);

// [2 + 4F] int64: world size, buffer length, then each fragment's slot, start, numel, local.
at::Tensor state_layout(int64_t world_size, int64_t numel, const std::vector<Fragment>& fragments);

void save_whole_state(checkpoint::CheckpointWriter& writer, int64_t rank, const at::Tensor& layout,
                      const NamedBuffers& state);
// Copies rank `rank`'s saved state into `state`'s tensors (in place), or a UsageError.
void load_whole_state(const checkpoint::CheckpointReader& reader, int64_t rank, const at::Tensor& layout,
                      const NamedBuffers& state);
// A UsageError when `reader` holds 8-bit state but this run keeps fp32 state (loading its moments).
void refuse_whole_state_checkpoint(const checkpoint::CheckpointReader& reader);

}  // namespace xtrain::zero
