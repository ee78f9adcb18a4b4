#include "bootstrap/checks.h"

#include <cstring>

#include "bootstrap/bootstrap.h"
#include "core/log.h"

namespace weft {
namespace boot {

bool rootHelloAuthentic(const RootHello& h, const Key& key, const uint8_t* rootNonce) {
  return h.magic == kRootHelloMagic && h.version == kWireVersion &&
         macEqual(h.mac, rootHelloMac(key, rootNonce, h).data());
}

std::string checkRootHello(const RootHello& h, const Key& key, const uint8_t* rootNonce,
                           int nranks, const std::function<bool(int)>& taken) {
  if (h.magic != kRootHelloMagic) return "bad magic";
  if (h.version != kWireVersion)
    return strFormat("wire version %u differs from %u", h.version, kWireVersion);
  if (!rootHelloAuthentic(h, key, rootNonce)) return "authentication failed (wrong job secret)";
  if (h.nranks < 1) return strFormat("nranks %d is invalid", h.nranks);
  if (h.nranks > kMaxRanks)
    return strFormat("nranks %d exceeds weft's limit of %d ranks", h.nranks, kMaxRanks);
  if (nranks > 0 && h.nranks != nranks)
    return strFormat("nranks %d differs from %d", h.nranks, nranks);
  if (h.rank < 0 || h.rank >= h.nranks)
    return strFormat("rank %d out of range for %d ranks", h.rank, h.nranks);
  if (taken && taken(h.rank)) return strFormat("duplicate rank %d", h.rank);
  net::Address a;
  if (!net::Address::unpack(h.addr, &a)) return "bad listen address";
  return "";
}

std::string checkRingHello(const RingHello& h, const Key& key, const Nonce& session, int nranks,
                           int prev) {
  if (h.magic != kRingHelloMagic) return "bad magic";
  if (h.version != kWireVersion)
    return strFormat("wire version %u differs from %u", h.version, kWireVersion);
  if (!macEqual(h.mac, ringHelloMac(key, session, h.rank, h.nranks).data()))
    return "authentication failed (another job's secret, or a replay from another ring)";
  if (h.nranks != nranks) return strFormat("nranks %d differs from %d", h.nranks, nranks);
  if (h.rank != prev) return strFormat("hello from rank %d, expected rank %d", h.rank, prev);
  return "";
}

std::string parseRankTable(const std::string& payload, int nranks, Nonce* session,
                           std::vector<net::Address>* table) {
  if (nranks < 1 ||
      payload.size() != kNonceBytes + static_cast<size_t>(nranks) * net::Address::kPackedSize)
    return strFormat("a table of %zu bytes for %d ranks", payload.size(), nranks);
  memcpy(session->data(), payload.data(), kNonceBytes);
  const char* addrs = payload.data() + kNonceBytes;
  table->resize(static_cast<size_t>(nranks));
  for (int i = 0; i < nranks; ++i)
    if (!net::Address::unpack(addrs + static_cast<size_t>(i) * net::Address::kPackedSize,
                              &(*table)[static_cast<size_t>(i)]))
      return strFormat("bad address of rank %d in the rank table", i);
  return "";
}

}  // namespace boot
}  // namespace weft
