// make_attention: the self-attention module a transformer Block runs, chosen by the config's
// `xtrain.model.attention` (nn::AttentionOptions, in nn/options.h: a plain options struct).
// Design choice: every choice returns a module with the same interface (forward [B, T, C] ->
// [B, T, C]) and the same parameter names (qkv, proj), held as a torch::nn::AnyModule, so a Block
// and its checkpoints do not change with the algorithm.
#pragma once
#include <torch/nn/modules/container/any.h>

#include <cstdint>

#include "xtrain/nn/options.h"

namespace xtrain::nn {

// type "multiscale": MultiScaleAttention(C, NH, windows, causal, dropout, kernel).
// type "dense", kernel "auto": CausalSelfAttention (max_T bounds T) when causal; any other kernel
// name (or bidirectional): MultiScaleAttention with no windows, i.e. dense attention through the
// kernel registry. UsageError naming xtrain.model.attention.* for a bad type, window or kernel.
torch::nn::AnyModule make_attention(int64_t C, int64_t NH, int64_t max_T, double dropout,
                                    const AttentionOptions& options, bool causal = true);

}  // namespace xtrain::nn
