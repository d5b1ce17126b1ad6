// The Hugging Face GPT-2 parameter layout (GPT2LMHeadModel / GPT2Model) and ours, both ways. Our GPT is GPT-2's
// function: pre-LayerNorm blocks (eps 1e-5), fused q|k|v projection split in that order, scores scaled by 1/√HS, GELU
// with the tanh approximation, biases everywhere, learned positions, LM head tied to wte. Only the names differ, and
// HF's Conv1D stores a linear map as [in, out] where nn::Linear stores [out, in]:
//   transformer.wte.weight              <-> wte.weight
//   transformer.wpe.weight              <-> wpe.weight
//   transformer.h.N.ln_1.{weight,bias}  <-> blocks.N.ln1.*
//   transformer.h.N.attn.c_attn.*       <-> blocks.N.attn.qkv.*   (weight transposed)
//   transformer.h.N.attn.c_proj.*       <-> blocks.N.attn.proj.*  (weight transposed)
//   transformer.h.N.ln_2.*              <-> blocks.N.ln2.*
//   transformer.h.N.mlp.c_fc.*          <-> blocks.N.mlp.fc.*     (weight transposed)
//   transformer.h.N.mlp.c_proj.*        <-> blocks.N.mlp.proj.*   (weight transposed)
//   transformer.ln_f.*                  <-> ln_f.*
//   lm_head.weight                      <-> lm_head.weight (untied models only)
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace xtrain::models {

using NamedWeights = std::vector<std::pair<std::string, at::Tensor>>;

// True when the names are HF GPT-2's (with or without the "transformer." prefix of GPT2LMHeadModel).
bool is_hf_gpt2_layout(const NamedWeights& weights);
// HF names -> ours, Conv1D weights transposed. Dropped: the causal-mask buffers older checkpoints carry (h.N.attn.bias,
// h.N.attn.masked_bias) and an lm_head.weight equal to wte (tied). Names outside the map pass through unchanged (the
// caller reports them).
NamedWeights from_hf_gpt2(const NamedWeights& hf);
// Ours -> HF names ("transformer." prefix), Linear weights transposed to Conv1D's [in, out]; UsageError naming a
// parameter that has no GPT-2 name (a model other than our GPT).
NamedWeights to_hf_gpt2(const NamedWeights& ours);

}  // namespace xtrain::models
