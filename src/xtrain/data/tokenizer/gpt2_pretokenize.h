// GPT-2's pre-tokenization: the text split as the regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// splits it (JavaScript semantics, as gpt-3-encoder runs it), written out as a scanner over code
// points instead of a regex engine: std::regex has no \p classes and no lookahead on UTF-8.
#pragma once
#include <string_view>
#include <vector>

namespace xtrain::data {

// The pieces in order; they concatenate to `text`. Bytes that are not UTF-8 are "other" characters.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace xtrain::data
