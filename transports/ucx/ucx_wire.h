// What the ucx transport exchanges. Both ends are the same build on the same
// architecture, so structs travel as laid out in memory.
//
// Matching: weft matches the k-th send from A to B with the k-th receive at B
// from A. UCP matches by tag, so the UCP tag of a message carries its sender
// and its number in that direction; the receiver posts for exactly that tag
// and never sees another message in its place:
//
//   bits 63..40  sender rank (24 bits)
//   bits 39..38  kind: header, data, hello
//   bits 37..0   message number on this pair and direction
//
// Each message is a header (weft tag and length, checked by the receiver)
// followed, when the payload is larger than kInline, by the payload as a
// second UCP message straight from and into the callers' buffers (UCP uses
// rendezvous, zero-copy, for large ones). A payload up to kInline bytes
// rides in the header message, copied through a bounce slot: one message
// instead of two, and no rendezvous handshake. 64 KiB: with 8 KiB, a 64 KiB
// allreduce on 4 ranks over UCX_TLS=tcp took 308-359 us, with 64 KiB
// 189-216 (Open MPI's UCX PML 221-312); 32-128 KiB on 2 ranks went from
// 0.8-1.1x to 1.4-1.7x Open MPI. Each op in flight holds one slot.
//
// The checks of what a peer sends (decodeBlob, checkHello, checkHeader) are
// pure functions here, free of UCX, so that tests/fuzz/fuzz_ucx_wire.cc
// calls them as the transport does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/hmac.h"
#include "core/status.h"
#include "transports/base/blob.h"

namespace weft {
namespace ucx {

constexpr uint32_t kBlobMagic = 0x5755424c;  // "WUBL"
constexpr uint32_t kHdrMagic = 0x57554844;   // "WUHD"
constexpr uint32_t kHelloMagic = 0x57554845; // "WUHE"
constexpr uint32_t kWireVersion = 3;  // 3: hellos carry an HMAC, not the secret
constexpr size_t kInline = 65536;
// A payload up to kImmediate bytes is first offered to UCP for immediate
// completion from a stack copy (UcxPeer::postSend); larger ones, or ones UCP
// cannot take at once, ride in the op's slot.
constexpr size_t kImmediate = 1024;

enum class Kind : uint64_t { Header = 0, Data = 1, Hello = 2 };

constexpr int kRankBits = 24;
constexpr int kSeqBits = 38;
constexpr uint64_t kSeqMask = (1ull << kSeqBits) - 1;
constexpr int kMaxRanks = 1 << kRankBits;

inline uint64_t ucpTag(int src, Kind k, uint64_t seq) {
  return (static_cast<uint64_t>(src) << 40) | (static_cast<uint64_t>(k) << kSeqBits) |
         (seq & kSeqMask);
}

// What the receiver of a message knows of its header message's length:
// UCX 1.13 does not report it for a receive that completes in its call.
constexpr size_t kUnknownLength = ~size_t(0);

struct MsgHeader {
  uint32_t magic;  // kHdrMagic
  uint32_t seq;    // low bits of the message number (a second check)
  uint64_t tag;    // weft tag
  uint64_t len;    // payload bytes; inline when <= kInline
  uint64_t stamp;  // Completion::stamp of the send (telemetry)
};
static_assert(sizeof(MsgHeader) == 32, "MsgHeader layout");

// What is wrong with the header message of message number `seq` that the
// receiver posted for `len` bytes under `tag`, `got` bytes long (or
// kUnknownLength), whose header is `h`.
enum class HeaderFault {
  kNone,
  kShort,         // fewer bytes than a header
  kGarbage,       // not a header (magic), or of another message (seq)
  kMismatch,      // the peer called another collective (tag or length differ)
  kInlineLength,  // the payload in the header message is not what its header says
};
inline HeaderFault checkHeader(const MsgHeader& h, size_t got, uint64_t seq, uint64_t tag,
                               uint64_t len) {
  if (got != kUnknownLength && got < sizeof h) return HeaderFault::kShort;
  if (h.magic != kHdrMagic || h.seq != static_cast<uint32_t>(seq)) return HeaderFault::kGarbage;
  if (h.tag != tag || h.len != len) return HeaderFault::kMismatch;
  // Inline payloads ride in the header message; a larger one comes alone.
  if (got != kUnknownLength && got != sizeof h + (len <= kInline ? len : 0))
    return HeaderFault::kInlineLength;
  return HeaderFault::kNone;
}

// Sent to every peer by connect(), on each endpoint: proves the endpoint
// works both ways and, by its HMAC under the communicator's key, that the
// peer holds the job secret and belongs to this communicator.
struct Hello {
  uint32_t magic;  // kHelloMagic
  uint32_t version;
  uint64_t commId;
  int32_t rank;  // the sender
  int32_t to;    // the rank it is meant for
  int32_t endpoint;  // 0: control, 1: bulk
  uint32_t reserved;
  uint8_t mac[kMacBytes];  // helloMac()
};
static_assert(sizeof(Hello) == 64, "Hello layout");
inline Mac helloMac(const Key& key, const Hello& h) {
  return hmacSha256(key, {{"weft ucx hello", 15}, MacPart::of(h.commId), MacPart::of(h.rank),
                          MacPart::of(h.to), MacPart::of(h.endpoint)});
}

// The hello rank `from` sends to rank `to` on endpoint `endpoint`.
inline Hello makeHello(const Key& key, uint64_t commId, int from, int to, int endpoint) {
  Hello h{kHelloMagic, kWireVersion, commId, from, to, endpoint, 0, {}};
  const Mac m = helloMac(key, h);
  memcpy(h.mac, m.data(), kMacBytes);
  return h;
}

// Rank `to`'s check of the hello it received from rank `from` on endpoint
// `endpoint` (0: control, 1: bulk): every field and its HMAC.
inline Status checkHello(const Hello& h, const Key& key, uint64_t commId, int from, int to,
                         int endpoint) {
  if (h.magic != kHelloMagic || h.version != kWireVersion || h.commId != commId ||
      h.rank != from || h.to != to || h.endpoint != endpoint ||
      !macEqual(h.mac, helloMac(key, h).data()))
    return Status(WEFT_ERR_REMOTE,
                  strFormat("ucx transport: rank %d: the hello from rank %d is not from this "
                            "job and communicator (its HMAC or fields do not match)",
                            to, from));
  return Status::ok();
}

// The published address: this header, then the UCP worker address.
struct BlobHeader {
  uint32_t magic;  // kBlobMagic
  uint32_t version;
  uint64_t hostHash;
  int32_t pid;
  uint32_t addrLen;
};
static_assert(sizeof(BlobHeader) == 24, "BlobHeader layout");

// Rank p's blob among `blobs` (indexed by rank): a header of this magic
// and version from a process (pid > 0), then exactly addrLen > 0 bytes of
// worker address, at *addr (inside blobs[p]). Otherwise BlobReader::bad(),
// or an error naming both wire versions.
inline Status decodeBlob(const std::vector<std::string>& blobs, int p, BlobHeader* hdr,
                         const char** addr) {
  BlobReader in("ucx", blobs, p);
  BlobHeader h;
  if (!in.get(&h) || h.magic != kBlobMagic) return in.bad();
  if (h.version != kWireVersion)
    return invalidArgument(strFormat("ucx transport: rank %d speaks wire version %u, this build %u",
                                     p, h.version, kWireVersion));
  if (h.pid <= 0 || h.addrLen == 0 || in.left() != h.addrLen) return in.bad();
  *hdr = h;
  *addr = in.take(h.addrLen);
  return Status::ok();
}

}  // namespace ucx
}  // namespace weft
