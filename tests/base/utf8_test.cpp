// escape_invalid_utf8 / printable_text against Python: tests/reference/gen_utf8.py decodes crafted
// byte strings (valid 2/3/4-byte sequences, truncated, overlong, lone continuation bytes,
// surrogates, beyond U+10FFFF, control characters, random byte soup) with
// bytes.decode("utf-8", "backslashreplace"); the results are compared byte for byte.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "support/paths.h"
#include "xtrain/base/utf8.h"

namespace xtrain::utf8_test {
namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

TEST(Utf8, MatchesPythonBackslashReplace) {
  std::ifstream in(testing::fixture("utf8_escape.json"));
  ASSERT_TRUE(in) << "missing fixture: run /usr/bin/python3 tests/reference/gen_utf8.py";
  const auto cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 60u);
  for (const auto& c : cases) {
    const std::string bytes = from_hex(c["hex"]);
    EXPECT_EQ(escape_invalid_utf8(bytes), c["python"].get<std::string>()) << c["name"];
    EXPECT_EQ(printable_text(bytes), c["printable"].get<std::string>()) << c["name"];
  }
}

// The rules stated directly, so a wrong fixture cannot hide a wrong rule.
TEST(Utf8, RulesByHand) {
  EXPECT_EQ(escape_invalid_utf8("\xC3\xA9"), "\xC3\xA9");                    // é kept
  EXPECT_EQ(escape_invalid_utf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");    // 😀 kept
  EXPECT_EQ(escape_invalid_utf8("\xC0\xAF"), "\\xc0\\xaf");                  // overlong '/'
  EXPECT_EQ(escape_invalid_utf8("\xED\xA0\x80"), "\\xed\\xa0\\x80");         // surrogate U+D800
  EXPECT_EQ(escape_invalid_utf8("\xE2\x82\xE2\x82\xAC"), "\\xe2\\x82\xE2\x82\xAC");  // € after a broken one
  EXPECT_EQ(escape_invalid_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));  // NUL is valid UTF-8
  EXPECT_EQ(printable_text(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable_text("\x1b[2J\r\n\t"), "\\x1b[2J\\x0d\n\t");
  EXPECT_EQ(printable_text("\xC2\x9B"), "\\x9b");  // C1 CSI as a valid code point
}

}  // namespace
}  // namespace xtrain::utf8_test
