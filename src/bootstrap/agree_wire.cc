#include "bootstrap/agree_wire.h"

#include <cstring>

#include "core/status.h"

namespace weft {
namespace agree {
namespace {

// The header: magic, kind, 3 spare bytes, sender, attempt, comm id, payload
// length, 4 spare bytes; little-endian host order (ranks of one job share
// an architecture, as everywhere in weft's wire formats).
struct Header {
  uint32_t magic;
  uint8_t kind;
  uint8_t spare[3];
  int32_t from;
  uint32_t attempt;
  uint64_t commId;
  uint32_t len;
  uint32_t spare2;
};
static_assert(sizeof(Header) == kHeaderBytes, "agreement header layout");

// A decision carries the root (32 bytes) and the nonce before its ranks.
constexpr size_t kDecidePrefix = 32 + kNonceBytes;

bool knownKind(uint8_t k) { return k >= 1 && k <= 6; }
bool hasRanks(Kind k) { return k == Kind::Propose || k == Kind::Decide || k == Kind::Stuck; }

}  // namespace

std::string encode(const Key& key, uint64_t commId, const Frame& f) {
  std::string payload;
  if (f.kind == Kind::Decide) {
    payload.append(reinterpret_cast<const char*>(f.root), sizeof f.root);
    payload.append(reinterpret_cast<const char*>(f.nonce.data()), f.nonce.size());
  }
  if (hasRanks(f.kind)) {
    const uint32_t n = static_cast<uint32_t>(f.ranks.size());
    payload.append(reinterpret_cast<const char*>(&n), sizeof n);
    if (n > 0) payload.append(reinterpret_cast<const char*>(f.ranks.data()), n * sizeof(int32_t));
  }
  Header h{};
  h.magic = kMagic;
  h.kind = static_cast<uint8_t>(f.kind);
  h.from = f.from;
  h.attempt = f.attempt;
  h.commId = commId;
  h.len = static_cast<uint32_t>(payload.size());
  const Mac mac = hmacSha256(key, {MacPart::of(h), {payload.data(), payload.size()}});
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out += payload;
  out.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  return out;
}

std::string checkHeader(const uint8_t* header, uint64_t commId, int nranks, size_t* payloadLen) {
  Header h;
  memcpy(&h, header, sizeof h);
  if (h.magic != kMagic) return strFormat("not an agreement frame (magic 0x%08x)", h.magic);
  if (h.commId != commId) return "a frame of another communicator";
  if (!knownKind(h.kind)) return strFormat("unknown frame kind %u", h.kind);
  if (h.from < 0 || h.from >= nranks)
    return strFormat("sender rank %d is outside [0, %d)", h.from, nranks);
  const size_t most = kDecidePrefix + 4 + 4 * static_cast<size_t>(nranks);
  if (h.len > most)
    return strFormat("a payload of %u bytes; at most %zu for %d ranks", h.len, most, nranks);
  *payloadLen = h.len;
  return "";
}

std::string decode(const Key& key, const uint8_t* header, const uint8_t* payload, size_t len,
                   const uint8_t* mac, int nranks, Frame* out) {
  const Mac want = hmacSha256(key, {{header, kHeaderBytes}, {payload, len}});
  if (!macEqual(want.data(), mac)) return "its MAC is wrong (not a rank of this communicator)";
  Header h;
  memcpy(&h, header, sizeof h);
  Frame f;
  f.kind = static_cast<Kind>(h.kind);
  f.from = h.from;
  f.attempt = h.attempt;
  size_t at = 0;
  if (f.kind == Kind::Decide) {
    if (len < kDecidePrefix) return "a decision too short for its root and nonce";
    memcpy(f.root, payload, sizeof f.root);
    memcpy(f.nonce.data(), payload + sizeof f.root, f.nonce.size());
    at = kDecidePrefix;
  }
  if (hasRanks(f.kind)) {
    uint32_t n = 0;
    if (len < at + sizeof n) return "no rank count";
    memcpy(&n, payload + at, sizeof n);
    at += sizeof n;
    if (n > static_cast<uint32_t>(nranks) || len != at + 4 * static_cast<size_t>(n))
      return strFormat("%u ranks in a payload of %zu bytes", n, len);
    f.ranks.resize(n);
    if (n > 0) memcpy(f.ranks.data(), payload + at, 4 * static_cast<size_t>(n));
    for (int32_t r : f.ranks)
      if (r < 0 || r >= nranks) return strFormat("rank %d is outside [0, %d)", r, nranks);
  } else if (len != 0) {
    return strFormat("a payload of %zu bytes where none belongs", len);
  }
  *out = std::move(f);
  return "";
}

}  // namespace agree
}  // namespace weft
