// The name map of hf_gpt2.h: a table of block-level parts and of the model-level names.
#include "xtrain/models/hf_gpt2.h"

#include <ATen/ops/equal.h>

#include <array>
#include <cctype>
#include <optional>

#include "xtrain/base/error.h"

namespace xtrain::models {
namespace {

struct Part {
  const char* ours;
  const char* hf;
  bool conv1d;  // HF stores the weight [in, out]
};
constexpr std::array<Part, 6> kBlockParts = {{{"ln1.", "ln_1.", false},
                                              {"attn.qkv.", "attn.c_attn.", true},
                                              {"attn.proj.", "attn.c_proj.", true},
                                              {"ln2.", "ln_2.", false},
                                              {"mlp.fc.", "mlp.c_fc.", true},
                                              {"mlp.proj.", "mlp.c_proj.", true}}};
constexpr std::array<const char*, 3> kTopLevel = {"wte.", "wpe.", "ln_f."};

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// "<prefix>N.<rest>" -> (N, rest) when s has that form.
std::optional<std::pair<std::string, std::string>> split_block(const std::string& s, const std::string& prefix) {
  if (!starts_with(s, prefix)) return std::nullopt;
  size_t i = prefix.size();
  const size_t digits = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == digits || i >= s.size() || s[i] != '.') return std::nullopt;
  return std::make_pair(s.substr(digits, i - digits), s.substr(i + 1));
}

at::Tensor maybe_transpose(const at::Tensor& t, bool conv1d, const std::string& leaf) {
  return conv1d && leaf == "weight" && t.dim() == 2 ? t.t().contiguous() : t;
}

// One HF name (prefix already stripped) -> ours; nullopt for the mask buffers.
std::optional<std::pair<std::string, at::Tensor>> hf_to_ours(const std::string& name, const at::Tensor& t) {
  if (auto b = split_block(name, "h.")) {
    const auto& [n, rest] = *b;
    if (rest == "attn.bias" || rest == "attn.masked_bias") return std::nullopt;
    for (const auto& p : kBlockParts) {
      if (starts_with(rest, p.hf)) {
        const std::string leaf = rest.substr(std::string(p.hf).size());
        return std::make_pair("blocks." + n + "." + p.ours + leaf, maybe_transpose(t, p.conv1d, leaf));
      }
    }
  }
  return std::make_pair(name, t);
}

}  // namespace

bool is_hf_gpt2_layout(const NamedWeights& weights) {
  for (const auto& [name, t] : weights) {
    if (name.find(".attn.c_attn.") != std::string::npos || starts_with(name, "transformer.")) return true;
  }
  return false;
}

NamedWeights from_hf_gpt2(const NamedWeights& hf) {
  NamedWeights out;
  const at::Tensor* wte = nullptr;
  for (const auto& [name, t] : hf) {
    if (name == "transformer.wte.weight" || name == "wte.weight") wte = &t;
  }
  for (const auto& [name, t] : hf) {
    const std::string bare = starts_with(name, "transformer.") ? name.substr(12) : name;
    if (bare == "lm_head.weight" && wte != nullptr && wte->sizes() == t.sizes() && at::equal(*wte, t)) continue;
    if (auto mapped = hf_to_ours(bare, t)) out.push_back(std::move(*mapped));
  }
  return out;
}

NamedWeights to_hf_gpt2(const NamedWeights& ours) {
  NamedWeights out;
  for (const auto& [name, t] : ours) {
    if (name == "lm_head.weight") {
      out.emplace_back(name, t);
      continue;
    }
    bool mapped = false;
    for (const char* top : kTopLevel) {
      if (starts_with(name, top)) out.emplace_back("transformer." + name, t), mapped = true;
    }
    if (auto b = split_block(name, "blocks."); b && !mapped) {
      const auto& [n, rest] = *b;
      for (const auto& p : kBlockParts) {
        if (!mapped && starts_with(rest, p.ours)) {
          const std::string leaf = rest.substr(std::string(p.ours).size());
          out.emplace_back("transformer.h." + n + "." + p.hf + leaf, maybe_transpose(t, p.conv1d, leaf));
          mapped = true;
        }
      }
    }
    XTRAIN_USAGE_CHECK(mapped, "export: parameter '", name,
                       "' has no name in the Hugging Face GPT-2 layout "
                       "(--layout hf-gpt2 is for a gpt model with "
                       "dense or multiscale attention; use --layout xtrain)");
  }
  return out;
}

}  // namespace xtrain::models
