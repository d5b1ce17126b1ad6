// Bytes shown as text: a byte-level model samples any of the 256 byte values, so its output is not
// UTF-8 in general, and raw invalid bytes (or control bytes such as ESC) garble a terminal.
// escape_invalid_utf8 is Python's `bytes.decode("utf-8", "backslashreplace")`: every byte that is
// not part of a well-formed sequence (Unicode Table 3-7: no overlongs, surrogates or code points
// above U+10FFFF) becomes `\xNN`; valid multi-byte sequences stay as they are.
#pragma once
#include <string>

namespace xtrain {

// Valid sequences kept, each byte outside one written as `\xNN` (lowercase hex).
std::string escape_invalid_utf8(const std::string& bytes);
// escape_invalid_utf8, and also every control character except '\n' and '\t' (C0, DEL, and the C1
// code points U+0080-U+009F) written as `\xNN` of its code point, as Python's repr() writes them:
// what xtrain prints for generated text.
std::string printable_text(const std::string& bytes);

}  // namespace xtrain
