// What the tcp transport puts on the wire. Both ends are the same build on
// the same architecture (little-endian x86-64 / aarch64), so the structs
// travel as they are laid out in memory; every field has a fixed size.
//
// Connection setup: the connecting rank (the lower one) sends a Hello, the
// accepting rank checks it (its HMAC under the communicator's key among
// the rest) and answers with its own Hello, which the connecting rank checks
// the same way; both then treat the socket as one of the nsocks data
// streams of that pair.
//
// Data: a message of msgLen bytes is cut into tcpNumParts() contiguous parts;
// part j travels on socket (seq + j) % nsocks, preceded by a PartHeader. The
// receiver computes the same split from the posted length, so it knows which
// socket carries which bytes before anything arrives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/hmac.h"
#include "core/status.h"
#include "net/socket.h"
#include "transports/base/blob.h"

namespace weft {
namespace tcp {

constexpr uint32_t kHelloMagic = 0x57544348;  // "WTCH"
constexpr uint32_t kDataMagic = 0x57544344;   // "WTCD"
constexpr uint32_t kBlobMagic = 0x5754424c;   // "WTBL"
constexpr uint32_t kWireVersion = 3;  // 3: hellos carry an HMAC, not the secret

struct Hello {
  uint32_t magic;    // kHelloMagic
  uint32_t version;  // kWireVersion
  uint64_t commId;   // TransportContext::commId (public)
  int32_t rank;       // the sender of this hello
  int32_t to;         // the rank it is meant for
  int32_t sockIndex;  // which of the pair's streams this socket is
  int32_t nsocks;     // streams per pair, must agree on both sides
  // helloMac(): HMAC-SHA256 under the communicator's key of the fields
  // above, so only a holder of the job secret can make one, and one made
  // for a stream of this communicator is good for nothing else.
  uint8_t mac[kMacBytes];
};
static_assert(sizeof(Hello) == 64, "Hello layout");
inline Mac helloMac(const Key& key, const Hello& h) {
  return hmacSha256(key, {{"weft tcp hello", 15}, MacPart::of(h.commId), MacPart::of(h.rank),
                          MacPart::of(h.to), MacPart::of(h.sockIndex), MacPart::of(h.nsocks)});
}

struct PartHeader {
  uint32_t magic;  // kDataMagic
  uint32_t seq;    // message number on this pair and direction (low 32 bits)
  uint64_t tag;
  uint64_t msgLen;   // the whole message
  uint64_t partLen;  // the bytes that follow this header
  uint64_t stamp;    // Completion::stamp of the send (telemetry)
};
static_assert(sizeof(PartHeader) == 40, "PartHeader layout");

// The address blob published by localAddress().
struct Blob {
  uint32_t magic;  // kBlobMagic
  uint32_t version;
  unsigned char addr[32];  // net::Address::pack
};
static_assert(sizeof(Blob) == 40, "Blob layout");

// Rank `rank`'s listening address from its blob among `blobs` (indexed by
// rank): exactly one Blob of this magic and version with an address that
// unpacks; otherwise BlobReader::bad().
inline Status decodeBlob(const std::vector<std::string>& blobs, int rank, net::Address* addr) {
  BlobReader in("tcp", blobs, rank);
  Blob b;
  if (!in.get(&b) || !in.atEnd() || b.magic != kBlobMagic || b.version != kWireVersion ||
      !net::Address::unpack(b.addr, addr))
    return in.bad();
  return Status::ok();
}

// Messages are split only when each part gets at least this much.
constexpr size_t kMinPartBytes = 64 << 10;

inline int numParts(size_t len, int nsocks) {
  size_t n = len / kMinPartBytes;
  if (n < 1) return 1;
  return n < static_cast<size_t>(nsocks) ? static_cast<int>(n) : nsocks;
}

// The stream that carries part 0 of message `seq`. Large messages rotate
// over the streams; small ones (a single part under kMinPartBytes) all take
// stream 0, so that a rank that falls behind reads a run of them in one
// readv instead of one per stream in turn (4-rank 64 B broadcasts over tcp:
// 0.85-0.9 -> 0.53-0.61 reads per op at the leaves).
inline int firstStream(size_t len, uint64_t seq, int nsocks) {
  if (len < kMinPartBytes) return 0;
  return static_cast<int>(seq % static_cast<uint64_t>(nsocks));
}

// Part j of a message of len bytes cut into n parts: [*off, *off + *plen).
inline void partRange(size_t len, int n, int j, size_t* off, size_t* plen) {
  size_t base = len / static_cast<size_t>(n);
  size_t rem = len % static_cast<size_t>(n);
  size_t uj = static_cast<size_t>(j);
  *off = uj * base + (uj < rem ? uj : rem);
  *plen = base + (uj < rem ? 1 : 0);
}

}  // namespace tcp
}  // namespace weft
