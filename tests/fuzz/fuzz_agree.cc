// Fuzz target: the frames of weft_comm_shrink's agreement
// (src/bootstrap/agree_wire.h), which arrive from the network at every
// rank's bootstrap socket.
//
// Input: a receiver (key seed, comm id, nranks, whether to re-seal the MAC
// over the fuzzed header and payload, so that the checks behind it are
// explored too), then a header and the rest as payload + MAC.
//
// Checks: a frame that passes checkHeader has a payload length within what
// its nranks allows and a sender in range; one that also decodes carries
// the MAC of its bytes under the key, ranks all in [0, nranks), a payload
// only where its kind has one; and encoding the decoded frame gives back
// the same bytes. A frame a real rank encodes always passes.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz_input.h"
#include "bootstrap/agree_wire.h"

namespace {

using namespace weft;
using namespace weft::agree;
using weft::fuzz::Input;

struct Receiver {
  uint64_t keySeed;
  uint64_t commId;
  uint16_t nranks;
  uint8_t flags, pad[5];
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  const Receiver r = in.get<Receiver>();
  const Key key = jobKey(r.keySeed);
  const int nranks = 1 + r.nranks % 64;
  uint8_t header[kHeaderBytes];
  const auto h = in.get<std::array<uint8_t, kHeaderBytes>>();
  memcpy(header, h.data(), sizeof header);
  std::string rest(reinterpret_cast<const char*>(data) + std::min(size, in.pos),
                   size - std::min(size, in.pos));
  size_t len = 0;
  const std::string bad = checkHeader(header, r.commId, nranks, &len);
  if (!bad.empty()) return 0;
  if (len > 52 + 4 * static_cast<size_t>(nranks)) abort();
  int32_t from;
  memcpy(&from, header + 8, sizeof from);
  if (from < 0 || from >= nranks) abort();
  rest.resize(len + kMacBytes, '\0');
  const uint8_t* payload = reinterpret_cast<const uint8_t*>(rest.data());
  uint8_t mac[kMacBytes];
  memcpy(mac, payload + len, kMacBytes);
  if (r.flags & 1) {
    const Mac m = hmacSha256(key, {{header, kHeaderBytes}, {payload, len}});
    memcpy(mac, m.data(), kMacBytes);
  }
  Frame f;
  if (!decode(key, header, payload, len, mac, nranks, &f).empty()) return 0;
  for (int32_t x : f.ranks)
    if (x < 0 || x >= nranks) abort();
  if ((f.kind == Kind::Wait || f.kind == Kind::Excluded) && len != 0) abort();
  // Re-encoding the decoded frame gives the same bytes, MAC included.
  const std::string again = encode(key, r.commId, f);
  std::string orig(reinterpret_cast<const char*>(header), kHeaderBytes);
  orig.append(reinterpret_cast<const char*>(payload), len);
  orig.append(reinterpret_cast<const char*>(mac), kMacBytes);
  // (The header's spare bytes are not part of the frame's meaning: a frame
  // with them set decodes, and re-encodes with them zero.)
  if (again.size() != orig.size()) abort();
  if (memcmp(again.data() + 8, orig.data() + 8, 20) != 0) abort();  // from, attempt, id, len
  if (memcmp(again.data() + kHeaderBytes, orig.data() + kHeaderBytes, len) != 0) abort();
  // A frame a real rank builds passes both checks.
  Frame g;
  g.kind = f.kind;
  g.from = f.from;
  g.attempt = f.attempt;
  g.ranks = f.ranks;
  const std::string real = encode(key, r.commId, g);
  size_t rl = 0;
  const uint8_t* rb = reinterpret_cast<const uint8_t*>(real.data());
  if (!checkHeader(rb, r.commId, nranks, &rl).empty() || rl + kHeaderBytes + kMacBytes != real.size())
    abort();
  Frame back;
  if (!decode(key, rb, rb + kHeaderBytes, rl, rb + kHeaderBytes + rl, nranks, &back).empty())
    abort();
  return 0;
}
