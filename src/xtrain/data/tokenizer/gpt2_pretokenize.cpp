// The regex's alternatives tried in its order at each position; the character classes are
// exclusive, so at most one of the three " ?class+" alternatives can match.
#include "xtrain/data/tokenizer/gpt2_pretokenize.h"

#include "xtrain/data/tokenizer/unicode_classes.h"

namespace xtrain::data {
namespace {

using unicode::CharClass;

struct Char {
  size_t pos;
  char32_t cp;
  CharClass cls;
};

// Length (in chars) of a contraction 's 't 're 've 'm 'll 'd at i, or 0.
size_t contraction(const std::vector<Char>& c, size_t i) {
  const size_t n = c.size();
  if (c[i].cp != U'\'' || i + 1 >= n) return 0;
  const char32_t a = c[i + 1].cp;
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if (i + 2 >= n) return 0;
  const char32_t b = c[i + 2].cp;
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  return 0;
}

// The end (exclusive, in chars) of the match at i.
size_t match_end(const std::vector<Char>& c, size_t i) {
  const size_t n = c.size();
  if (size_t k = contraction(c, i)) return i + k;
  const auto run = [&](size_t k, CharClass cls) {
    while (k < n && c[k].cls == cls) ++k;
    return k;
  };
  const CharClass cls = c[i].cls;
  if (cls != CharClass::kSpace) return run(i, cls);  // \p{L}+, \p{N}+ or [^\s\p{L}\p{N}]+
  if (c[i].cp == U' ' && i + 1 < n && c[i + 1].cls != CharClass::kSpace) return run(i + 1, c[i + 1].cls);
  const size_t k = run(i, CharClass::kSpace);
  // \s+(?!\S): the whole run at the end of the text, else all but its last char (which then
  // prefixes the next word); a single space before a non-space falls through to \s+.
  if (k == n || k - i == 1) return k;
  return k - 1;
}

}  // namespace

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const auto d = unicode::decode_utf8(text, pos);
    chars.push_back({pos, d.valid ? d.code_point : U'\xfffd', unicode::classify(d)});
    pos += d.length;
  }
  std::vector<std::string_view> pieces;
  for (size_t i = 0; i < chars.size();) {
    const size_t j = match_end(chars, i);
    const size_t end = j < chars.size() ? chars[j].pos : text.size();
    pieces.push_back(text.substr(chars[i].pos, end - chars[i].pos));
    i = j;
  }
  return pieces;
}

}  // namespace xtrain::data
