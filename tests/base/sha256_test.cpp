// SHA-256 against FIPS 180-4's example vectors and digests from Python's hashlib (lengths around
// the 55/56/64-byte padding boundaries), one-shot and fed in uneven pieces.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "xtrain/base/sha256.h"

namespace xtrain::sha256_test {
namespace {

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopq"
                       "rsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char((i * 31 + 7) % 256);
  return s;
}

// /usr/bin/python3 -c "import hashlib; [print(n, hashlib.sha256(bytes((i*31+7)%256 for i in
//   range(n))).hexdigest()) for n in [1,55,56,63,64,65,119,120,1000]]"
const std::vector<std::pair<size_t, std::string>> kHashlib = {
    {1, "ca358758f6d27e6cf45272937977a748fd88391db679ceda7dc7bf1f005ee879"},
    {55, "8aa994584139d128848eeebc4e815639ba5ab6e6e39574195a63ac4f14f7c43b"},
    {56, "ad574708f75c044c9b85de64cb568ee7711ff4f36448c6242f053ba8f6cc2b63"},
    {63, "280ed3e8ff1df845b2e7dfe6ac6cee817bef20e783cc65abc41b818b4d2fe076"},
    {64, "c6ab9724ade5b6a7a1edfffb12f3aa9181351355af8fd08c919952ad211339dd"},
    {65, "788367c73c7ddf4c53f65e68cc0d943e6227ab55b0e78ba63ace822b1c6301c0"},
    {119, "3d610547d68216dedf7435a4fb6260353911f6b3fd3f18805ddb8be285d726fe"},
    {120, "1f80156a804cb7862ad113e8200e9d74499723e7c7854d5f48776d3148e09656"},
    {1000, "5097e7d587352f5097062ae679f37bda5802d9f875aba14c8cb4d1a188ada179"},
};

TEST(Sha256, MatchesHashlibAtPaddingBoundaries) {
  for (const auto& [n, want] : kHashlib) EXPECT_EQ(sha256_hex(pattern(n)), want) << "length " << n;
}

TEST(Sha256, IncrementalEqualsOneShot) {
  for (const auto& [n, want] : kHashlib) {
    const std::string s = pattern(n);
    for (size_t piece : {1, 3, 17, 63, 64, 65, 200}) {
      Sha256 h;
      for (size_t at = 0; at < n; at += piece) h.update(s.data() + at, std::min(piece, n - at));
      EXPECT_EQ(h.finish_hex(), want) << "length " << n << " in pieces of " << piece;
    }
  }
}

}  // namespace
}  // namespace xtrain::sha256_test
