// UTF-8 decoding (Unicode Table 3-7) and the \p{L} / \p{N} / \s classes by binary search over the
// generated range tables.
#include "xtrain/data/tokenizer/unicode_classes.h"

#include <algorithm>
#include <iterator>

namespace xtrain::data::unicode {
namespace {

struct CodePointRange {
  char32_t first, last;
};
#include "xtrain/data/tokenizer/unicode_classes_table.inc"

template <size_t N>
bool in_ranges(const CodePointRange (&ranges)[N], char32_t c) {
  auto it = std::upper_bound(std::begin(ranges), std::end(ranges), c,
                             [](char32_t v, const CodePointRange& r) { return v < r.first; });
  return it != std::begin(ranges) && c <= std::prev(it)->last;
}

bool continuation(unsigned char b) { return (b & 0xc0) == 0x80; }

}  // namespace

DecodedChar decode_utf8(std::string_view s, size_t pos) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[pos + k]); };
  const unsigned char b0 = at(0);
  if (b0 < 0x80) return {b0, 1, true};
  size_t len = 0;
  char32_t cp = 0, min = 0;
  if (b0 >= 0xc2 && b0 <= 0xdf) len = 2, cp = b0 & 0x1f, min = 0x80;
  else if (b0 >= 0xe0 && b0 <= 0xef) len = 3, cp = b0 & 0x0f, min = 0x800;
  else if (b0 >= 0xf0 && b0 <= 0xf4) len = 4, cp = b0 & 0x07, min = 0x10000;
  else return {b0, 1, false};
  if (pos + len > s.size()) return {b0, 1, false};
  for (size_t k = 1; k < len; ++k) {
    if (!continuation(at(k))) return {b0, 1, false};
    cp = (cp << 6) | (at(k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return {b0, 1, false};
  return {cp, len, true};
}

bool is_letter(char32_t c) { return in_ranges(kLetterRanges, c); }
bool is_number(char32_t c) { return in_ranges(kNumberRanges, c); }

bool is_space(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0d)) return true;
  if (c < 0xa0) return false;
  return c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000 || c == 0xfeff;
}

CharClass classify(const DecodedChar& c) {
  if (!c.valid) return CharClass::kOther;
  if (is_space(c.code_point)) return CharClass::kSpace;
  if (is_letter(c.code_point)) return CharClass::kLetter;
  if (is_number(c.code_point)) return CharClass::kNumber;
  return CharClass::kOther;
}

}  // namespace xtrain::data::unicode
