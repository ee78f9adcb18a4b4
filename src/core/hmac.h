// The cryptography weft uses to authenticate connections: HMAC-SHA256 (from
// OpenSSL's libcrypto), random bytes from the kernel, and a comparison that
// takes the same time wherever two MACs differ. docs/security.md says what
// is authenticated with them and what is not.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/status.h"

namespace weft {

constexpr size_t kMacBytes = 32;
constexpr size_t kNonceBytes = 16;
using Mac = std::array<uint8_t, kMacBytes>;
using Key = Mac;  // HMAC-SHA256 keys weft derives are one digest long
using Nonce = std::array<uint8_t, kNonceBytes>;

// One input of a MAC: a byte range.
struct MacPart {
  const void* data;
  size_t len;
  template <class T>
  static MacPart of(const T& v) {
    return {&v, sizeof v};
  }
};

// HMAC-SHA256 of the concatenation of `parts` under `key`.
Mac hmacSha256(const void* key, size_t keyLen, std::initializer_list<MacPart> parts);
inline Mac hmacSha256(const Key& key, std::initializer_list<MacPart> parts) {
  return hmacSha256(key.data(), key.size(), parts);
}

// The job key: HMAC-SHA256 keyed by a fixed label over the 64-bit job
// secret. Every MAC of a job is under this key or one derived from it.
Key jobKey(uint64_t secret);
// A key (or identifier) for one purpose, derived from `key`: HMAC-SHA256
// of `label` and `context`. Different labels give unrelated keys.
Key deriveKey(const Key& key, const char* label, const void* context = nullptr,
              size_t contextLen = 0);
// The first 8 bytes of deriveKey, as a number: a public name that reveals
// nothing of `key` (shared-memory names, communicator ids).
uint64_t deriveTag(const Key& key, const char* label);

// Equal MACs, in time independent of where they differ.
bool macEqual(const uint8_t* a, const uint8_t* b, size_t len = kMacBytes);

// Fills `out` with `len` bytes from the kernel's random source.
Status randomBytes(void* out, size_t len);
Status randomNonce(Nonce* out);

}  // namespace weft
