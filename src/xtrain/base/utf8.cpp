#include "xtrain/base/utf8.h"

#include <cstdint>

namespace xtrain {
namespace {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 when s[i] does not start one
// (Unicode 15, Table 3-7). The first continuation byte's range depends on the lead byte.
size_t valid_sequence_length(const std::string& s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b = at(i);
  if (b < 0x80) return 1;
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3;
    if (b == 0xE0) lo = 0xA0;  // below: overlong
    if (b == 0xED) hi = 0x9F;  // above: surrogates U+D800-U+DFFF
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4;
    if (b == 0xF0) lo = 0x90;  // below: overlong
    if (b == 0xF4) hi = 0x8F;  // above: beyond U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong 2-byte) or F5-FF
  }
  if (i + len > s.size()) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  }
  return len;
}

void append_hex(std::string& out, unsigned value) {
  static const char* kHex = "0123456789abcdef";
  out += "\\x";
  out += kHex[(value >> 4) & 15];
  out += kHex[value & 15];
}

bool is_control(const std::string& s, size_t i, size_t len, unsigned* code) {
  const auto b = static_cast<uint8_t>(s[i]);
  if (len == 1) {
    *code = b;
    return (b < 0x20 && b != '\n' && b != '\t') || b == 0x7F;
  }
  // C1 controls U+0080-U+009F are the two-byte sequences C2 80 .. C2 9F.
  *code = static_cast<uint8_t>(s[i + 1]);
  return len == 2 && b == 0xC2 && *code <= 0x9F;
}

std::string escape(const std::string& bytes, bool controls) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const size_t len = valid_sequence_length(bytes, i);
    unsigned code = 0;
    if (len == 0) {
      // One byte at a time gives Python's result: the rest of a broken sequence is continuation
      // bytes, which never start a valid one, so they are escaped in turn.
      append_hex(out, static_cast<uint8_t>(bytes[i]));
      i += 1;
    } else if (controls && is_control(bytes, i, len, &code)) {
      append_hex(out, code);
      i += len;
    } else {
      out.append(bytes, i, len);
      i += len;
    }
  }
  return out;
}

}  // namespace

std::string escape_invalid_utf8(const std::string& bytes) { return escape(bytes, false); }

std::string printable_text(const std::string& bytes) { return escape(bytes, true); }

}  // namespace xtrain
