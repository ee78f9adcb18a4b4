#include "core/hmac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

namespace weft {

Mac hmacSha256(const void* key, size_t keyLen, std::initializer_list<MacPart> parts) {
  // One contiguous message: the inputs are a few hundred bytes at most
  // (hellos, rank tables), so a copy is cheaper than a streaming context.
  size_t total = 0;
  for (const MacPart& p : parts) total += p.len;
  std::string msg;
  msg.reserve(total);
  for (const MacPart& p : parts) msg.append(static_cast<const char*>(p.data), p.len);
  Mac out{};
  unsigned int outLen = 0;
  HMAC(EVP_sha256(), key, static_cast<int>(keyLen), reinterpret_cast<const uint8_t*>(msg.data()),
       msg.size(), out.data(), &outLen);
  return out;
}

Key jobKey(uint64_t secret) {
  static const char kLabel[] = "weft job key v1";
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(secret >> (8 * i));
  return hmacSha256(kLabel, sizeof kLabel - 1, {{le, sizeof le}});
}

Key deriveKey(const Key& key, const char* label, const void* context, size_t contextLen) {
  return hmacSha256(key, {{label, strlen(label) + 1}, {context, context ? contextLen : 0}});
}

uint64_t deriveTag(const Key& key, const char* label) {
  Key k = deriveKey(key, label);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(k[i]) << (8 * i);
  return v;
}

bool macEqual(const uint8_t* a, const uint8_t* b, size_t len) {
  return CRYPTO_memcmp(a, b, len) == 0;
}

Status randomBytes(void* out, size_t len) {
  auto* p = static_cast<uint8_t*>(out);
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return systemError("getrandom", errno);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status randomNonce(Nonce* out) { return randomBytes(out->data(), out->size()); }

}  // namespace weft
