// Fuzz target: the bootstrap's checks of what arrives from the network
// (src/bootstrap/checks.h): the root's check of a rank's hello, a rank's
// check of its ring predecessor's hello, and the parse of the rank table
// in the root's reply.
//
// Input: a RootHello, a RingHello, the receiving side (a secret, nonces,
// the nranks known so far, the ranks taken, the expected predecessor,
// whether to re-seal each hello's MAC over its fuzzed fields so that the
// checks behind the MAC are explored too), then a rank table payload;
// missing bytes read as zero.
//
// Checks: a root hello that passes carries the MAC of its fields under the
// job key answering this challenge, has nranks in [1, kMaxRanks] equal to
// the known one, a rank in range that is not taken, and a ring address that
// unpacks; the hello a real rank builds passes unless its rank is taken. A
// ring hello that passes is authentic for this session and from the
// predecessor of this nranks. A table that parses has exactly the session
// and nranks addresses, each of which unpacks.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/checks.h"

namespace {

using namespace weft;
using namespace weft::boot;

using weft::fuzz::Input;

struct Side {
  uint64_t secret;
  uint8_t rootNonce[kNonceBytes];
  uint8_t session[kNonceBytes];
  int32_t nranks;  // the root's known nranks (its low bits), the ring's nranks
  uint32_t takenMask;
  uint8_t flags, prev, pad[2];
};

void rootHello(const Side& s, RootHello h) {
  const Key key = jobKey(s.secret);
  if (s.flags & 1) {
    const Mac m = rootHelloMac(key, s.rootNonce, h);
    memcpy(h.mac, m.data(), kMacBytes);
  }
  const int known = s.nranks & 0xff;  // small, so that taken ranks and equal counts happen
  auto taken = [&](int r) { return r >= 0 && r < 32 && (s.takenMask >> r & 1); };
  const std::string why = checkRootHello(h, key, s.rootNonce, known, taken);
  if (why.empty()) {
    if (!rootHelloAuthentic(h, key, s.rootNonce)) abort();
    if (h.nranks < 1 || h.nranks > kMaxRanks || (known > 0 && h.nranks != known)) abort();
    if (h.rank < 0 || h.rank >= h.nranks || taken(h.rank)) abort();
    net::Address a;
    if (!net::Address::unpack(h.addr, &a)) abort();
  }
  // What a real rank sends passes (unless its rank is taken).
  RootHello good{};
  good.magic = kRootHelloMagic;
  good.version = kWireVersion;
  memcpy(good.nonce, h.nonce, kNonceBytes);
  good.nranks = known > 0 ? known : 4;
  good.rank = static_cast<int32_t>(s.prev % good.nranks);
  net::Address a;
  net::Address::parse("10.1.2.3:4567", &a);
  a.pack(good.addr);
  const Mac m = rootHelloMac(key, s.rootNonce, good);
  memcpy(good.mac, m.data(), kMacBytes);
  if (checkRootHello(good, key, s.rootNonce, known, taken).empty() == taken(good.rank)) abort();
}

void ringHello(const Side& s, RingHello h) {
  const Key key = jobKey(s.secret);
  Nonce session;
  memcpy(session.data(), s.session, kNonceBytes);
  if (s.flags & 2) {
    const Mac m = ringHelloMac(key, session, h.rank, h.nranks);
    memcpy(h.mac, m.data(), kMacBytes);
  }
  const int nranks = 1 + (s.nranks & 0xffff);
  const int prev = s.prev % nranks;
  if (checkRingHello(h, key, session, nranks, prev).empty()) {
    if (h.magic != kRingHelloMagic || h.version != kWireVersion || h.nranks != nranks ||
        h.rank != prev || !macEqual(h.mac, ringHelloMac(key, session, h.rank, h.nranks).data()))
      abort();
  }
  RingHello good{kRingHelloMagic, kWireVersion, prev, nranks, {}};
  const Mac m = ringHelloMac(key, session, prev, nranks);
  memcpy(good.mac, m.data(), kMacBytes);
  if (!checkRingHello(good, key, session, nranks, prev).empty()) abort();
}

void table(const Side& s, const std::string& payload) {
  const int nranks = (s.nranks >> 8) & 0x3f;
  Nonce session{};
  std::vector<net::Address> t;
  if (!parseRankTable(payload, nranks, &session, &t).empty()) return;
  if (nranks < 1 || t.size() != static_cast<size_t>(nranks) ||
      payload.size() != kNonceBytes + t.size() * net::Address::kPackedSize)
    abort();
  if (memcmp(session.data(), payload.data(), kNonceBytes) != 0) abort();
  for (const net::Address& a : t) {
    unsigned char again[net::Address::kPackedSize];
    a.pack(again);
    net::Address b;
    if (!net::Address::unpack(again, &b) || b.toString() != a.toString()) abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  const RootHello rh = in.get<RootHello>();
  const RingHello gh = in.get<RingHello>();
  const Side s = in.get<Side>();
  rootHello(s, rh);
  ringHello(s, gh);
  table(s, std::string(reinterpret_cast<const char*>(data) + in.pos, size - in.pos));
  return 0;
}
