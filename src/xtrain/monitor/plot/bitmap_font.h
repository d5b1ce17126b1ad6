// A 5x8 bitmap font for printable ASCII (the classic "glcd" 5x7 LCD font with descenders, public
// domain), for plot labels without a font library. Glyphs are 5 columns of 8 bits, bit 0 at the
// top; characters outside 32..126 draw as '?'.
#pragma once
#include <cstdint>
#include <string>

namespace xtrain::monitor::font {

constexpr int kGlyphWidth = 5;
constexpr int kGlyphHeight = 8;
constexpr int kAdvance = 6;  // glyph + one column of spacing

// The 5 column bytes of `c`.
const uint8_t* glyph(char c);
// Width in pixels of `text` at `scale` (no trailing spacing).
int text_width(const std::string& text, int scale = 1);

}  // namespace xtrain::monitor::font
