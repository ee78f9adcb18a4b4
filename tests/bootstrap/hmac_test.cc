// src/core/hmac.h: HMAC-SHA256 against RFC 4231's test vectors (so weft's
// MACs are the standard ones), the derivations, and the comparison.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "core/hmac.h"

using namespace weft;

namespace {

std::string hex(const Mac& m) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t b : m) {
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}

}  // namespace

TEST_CASE("hmac: RFC 4231 test vectors", "[hmac]") {
  // Test case 1.
  std::string k1(20, '\x0b');
  CHECK(hex(hmacSha256(k1.data(), k1.size(), {{"Hi There", 8}})) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2, its message given in two parts.
  CHECK(hex(hmacSha256("Jefe", 4, {{"what do ya want ", 16}, {"for nothing?", 12}})) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than the block.
  std::string k6(131, '\xaa');
  const char* m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  CHECK(hex(hmacSha256(k6.data(), k6.size(), {{m6, strlen(m6)}})) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("hmac: derived keys and tags differ by secret and label", "[hmac]") {
  const Key a = jobKey(1), b = jobKey(2);
  CHECK(a != b);
  CHECK(jobKey(1) == a);
  CHECK(deriveKey(a, "x") != deriveKey(a, "y"));
  CHECK(deriveKey(a, "x") != deriveKey(b, "x"));
  const uint8_t ctx1[4] = {1, 2, 3, 4}, ctx2[4] = {1, 2, 3, 5};
  CHECK(deriveKey(a, "x", ctx1, 4) != deriveKey(a, "x", ctx2, 4));
  CHECK(deriveTag(a, "shm") != deriveTag(a, "board"));
  CHECK(deriveTag(a, "shm") == deriveTag(jobKey(1), "shm"));
}

TEST_CASE("hmac: macEqual and random nonces", "[hmac]") {
  Mac x = jobKey(7), y = x;
  CHECK(macEqual(x.data(), y.data()));
  for (size_t i : {size_t{0}, size_t{17}, kMacBytes - 1}) {
    y = x;
    y[i] ^= 0x80;
    CHECK_FALSE(macEqual(x.data(), y.data()));
  }
  Nonce n1{}, n2{};
  REQUIRE(randomNonce(&n1).isOk());
  REQUIRE(randomNonce(&n2).isOk());
  CHECK(n1 != n2);
}
