// Incremental decoding (a KV cache) for the GPT: each sequence keeps every layer's keys and values,
// the prompt runs once (prefill), then each step runs one position per sequence, the sequences of a
// step batched through the linear layers. Design choice: the caches live in one pool of slots per
// layer, so dense attention over sequences of different lengths is one masked batched GEMM (each
// sees its positions 0..t); multi-scale attention, per sequence, builds exactly the segments the causal rule of shared/design/multiscale-attention.md lets query t
// see (all complete, so pooling the cached keys gives the full forward's values). Once a sequence
// fills seq_len, each step recomputes the last seq_len tokens, as generate() crops its context.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace xtrain::models {

class GPTImpl;

// Replacements for the decoder's float layers (the int8 model of `xtrain compress`): a linear layer
// by its module path ("blocks.0.attn.qkv", "blocks.0.mlp.fc", "lm_head"), the embedding tables.
struct DecoderWeights {
  at::Tensor wte, wpe;  // undefined: the model's own
  std::map<std::string, std::function<at::Tensor(const at::Tensor&)>> linears;
};

// One sequence's cache and tokens (prompt and generated).
class DecodeState {
 public:
  virtual ~DecodeState() = default;
  virtual int64_t length() const = 0;  // tokens seen
};

class IncrementalDecoder {
 public:
  virtual ~IncrementalDecoder() = default;
  virtual int64_t max_context() const = 0;  // seq_len
  virtual int64_t vocab() const = 0;
  virtual std::unique_ptr<DecodeState> start() = 0;
  // Runs `tokens` (non-empty, the first tokens of the sequence) -> logits of the last one, float [V].
  virtual at::Tensor prefill(DecodeState& state, const std::vector<int64_t>& tokens) = 0;
  // Appends tokens[b] to states[b] for every b, one batched step -> logits float [B, V].
  virtual at::Tensor step(const std::vector<DecodeState*>& states, const std::vector<int64_t>& tokens) = 0;
};

// A decoder over `gpt` (kept alive by the caller; runs under no_grad, in eval mode semantics: no
// dropout). UsageError for an attention the cache does not implement (bidirectional).
std::shared_ptr<IncrementalDecoder> make_gpt_decoder(std::shared_ptr<GPTImpl> gpt, DecoderWeights weights = {});

// The causal multi-scale rule for query t with window w: one range per level, nearest first.
// Level `size` (2^level) covers positions [start, end) as (end - start) / size whole segments.
struct SegmentRange {
  int64_t start, end, size;
};
std::vector<SegmentRange> multiscale_ranges(int64_t t, int64_t w);

}  // namespace xtrain::models
