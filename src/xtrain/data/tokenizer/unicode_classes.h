// The character classes GPT-2's pre-tokenization regex uses (\p{L}, \p{N}, and JavaScript's \s), on
// code points decoded from UTF-8. The letter and number tables are generated from node's own
// regular expressions (unicode_classes_gen.js), the engine of the gpt-3-encoder reference, so no
// ICU is needed and the classes agree with the reference.
#pragma once
#include <cstddef>
#include <string_view>

namespace xtrain::data::unicode {

enum class CharClass { kSpace, kLetter, kNumber, kOther };

struct DecodedChar {
  char32_t code_point = 0;
  size_t length = 1;  // bytes; 1 for a byte that starts no well-formed sequence
  bool valid = false;
};

// The UTF-8 sequence at `pos` (strict: no overlongs, surrogates or code points past U+10FFFF).
DecodedChar decode_utf8(std::string_view text, size_t pos);

bool is_letter(char32_t c);
bool is_number(char32_t c);
bool is_space(char32_t c);  // JavaScript's \s: WhiteSpace and LineTerminator

// An invalid byte is kOther: it is neither space, letter nor number to the regex.
CharClass classify(const DecodedChar& c);

}  // namespace xtrain::data::unicode
