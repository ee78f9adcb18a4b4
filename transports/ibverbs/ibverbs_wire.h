// What the ibverbs transport puts on its queue pairs (same build on both
// ends, structs as laid out in memory).
//
// A pair of ranks has nqps RC queue pairs; message m of a direction uses
// QP m % nqps, so each QP carries its share in order (RC delivers in order)
// and large messages of consecutive steps travel side by side.
//
//   small (<= kEager bytes): one SEND of Header + payload into one of the
//       receiver's pre-posted slots (copied out there);
//   large: the sender SENDs an RTS (Header: tag, length); the receiver,
//       once that receive is posted, checks them, registers its buffer
//       and SENDs a CTS (address, rkey); the sender RDMA WRITEs the payload
//       straight into it WITH IMMEDIATE (the message number), which
//       completes the receive. No copies, no receiver CPU in the transfer.
//
// Every SEND and WRITE WITH IMMEDIATE consumes one receive slot at the peer:
// credits.h accounts for them; the credits a side owes ride in every header
// it sends (and in credit-only messages when nothing else goes).
//
// The checks of what a peer sends (decodeBlob, checkHeader, helloOk) are
// pure functions here, free of verbs, so that tests/fuzz/fuzz_ib_wire.cc
// calls them as the transport does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/hmac.h"
#include "core/status.h"
#include "transports/base/blob.h"

namespace weft {
namespace ib {

constexpr uint32_t kHdrMagic = 0x57494248;   // "WIBH"
constexpr uint32_t kBlobMagic = 0x5749424c;  // "WIBL"
constexpr uint32_t kWireVersion = 1;
constexpr uint32_t kSlots = 32;        // receive slots per QP
constexpr size_t kSlotBytes = 8192;    // one slot: header + eager payload

enum class MsgType : uint8_t { Eager = 1, Rts = 2, Cts = 3, Credit = 4, Hello = 5 };

struct Header {
  uint32_t magic;  // kHdrMagic
  uint8_t type;    // MsgType
  uint8_t reserved[3];
  uint32_t credits;  // slots the sender reposted since its last header
  uint32_t seq;      // message number (low 32 bits)
  uint64_t tag;      // weft tag (Eager, Rts)
  uint64_t len;      // payload bytes (Eager, Rts); commId (Hello)
  uint64_t addr;     // Cts: where to write; Eager, Rts: the send's Completion::stamp
  uint32_t rkey;     // Cts
  int32_t rank;      // Hello: the sender
};
static_assert(sizeof(Header) == 48, "Header layout");

// A Hello's payload: HMAC-SHA256 under the communicator's key of its
// commId, sender and receiver, so a peer that does not hold the job secret
// is refused and the secret never crosses the fabric.
inline Mac helloMac(const Key& key, uint64_t commId, int32_t from, int32_t to) {
  return hmacSha256(key, {{"weft ibverbs hello", 19}, MacPart::of(commId), MacPart::of(from),
                          MacPart::of(to)});
}

constexpr size_t kEager = kSlotBytes - sizeof(Header);

// What is wrong with a message that arrived in a receive slot: byteLen
// bytes (the work completion's byte_len), starting with header h. What
// each type carries after its header is exactly what IbPeer sends:
// Eager its payload (at most kEager bytes, h.len of them), Hello the MAC,
// the others nothing.
enum class HeaderFault {
  kNone,
  kGarbage,  // shorter than a header, or not one (magic)
  kType,     // no MsgType
  kLength,   // byteLen is not what the header's type and length say
};
inline HeaderFault checkHeader(const Header& h, size_t byteLen) {
  if (byteLen < sizeof h || h.magic != kHdrMagic) return HeaderFault::kGarbage;
  size_t body = 0;
  switch (static_cast<MsgType>(h.type)) {
    case MsgType::Eager:
      if (h.len > kEager) return HeaderFault::kLength;
      body = static_cast<size_t>(h.len);
      break;
    case MsgType::Hello:
      body = kMacBytes;
      break;
    case MsgType::Rts:
    case MsgType::Cts:
    case MsgType::Credit:
      break;
    default:
      return HeaderFault::kType;
  }
  return byteLen - sizeof h == body ? HeaderFault::kNone : HeaderFault::kLength;
}

// The Hello rank `from` sends to rank `to`: its header (credits and seq
// are the sender's to fill) and its payload, helloMac().
inline Header helloHeader(uint64_t commId, int32_t from) {
  Header h{};
  h.magic = kHdrMagic;
  h.type = static_cast<uint8_t>(MsgType::Hello);
  h.len = commId;
  h.rank = from;
  return h;
}
// Whether Hello `h` (checkHeader passed) with MAC `mac` (kMacBytes) is the
// one rank `from` of communicator `commId` sends to rank `to`.
inline bool helloOk(const Header& h, const uint8_t* mac, const Key& key, uint64_t commId,
                    int32_t from, int32_t to) {
  return h.type == static_cast<uint8_t>(MsgType::Hello) && h.len == commId && h.rank == from &&
         macEqual(mac, helloMac(key, commId, from, to).data());
}

// Per QP, published in the address blob for one remote rank.
struct QpAddr {
  uint32_t qpn;
  uint32_t psn;
};

// The blob: this, then nranks * nqps QpAddr (entry [r * nqps + k] is the
// k-th QP this rank made for rank r).
struct BlobHeader {
  uint32_t magic;  // kBlobMagic
  uint32_t version;
  uint64_t hostHash;
  int32_t pid;
  int32_t nranks;
  int32_t nqps;
  int32_t mtu;
  uint16_t lid;
  uint8_t useGid;
  uint8_t reserved;
  uint32_t reserved2;
  uint8_t gid[16];
};
static_assert(sizeof(BlobHeader) == 56, "BlobHeader layout");

// What rank `rank` (of `nranks`, with `nqps` QPs per peer) takes from rank
// p's blob among `blobs` (indexed by rank): its header, and the nqps QPs p
// made for `rank` (*qps), each a real QP number and PSN (24 bits, QP 0 is
// no RC QP). The blob is exactly a header of this magic and version for
// nranks ranks and nqps QPs per peer, then nranks * nqps QpAddr.
// Otherwise BlobReader::bad(), or an error that names what disagrees.
inline Status decodeBlob(const std::vector<std::string>& blobs, int p, int rank, int nranks,
                         int nqps, BlobHeader* hdr, std::vector<QpAddr>* qps) {
  BlobReader in("ibverbs", blobs, p);
  BlobHeader h;
  if (p < 0 || p >= nranks || p == rank || rank < 0 || rank >= nranks || nqps < 1 ||
      !in.get(&h) || h.magic != kBlobMagic)
    return in.bad();
  if (h.version != kWireVersion)
    return invalidArgument(strFormat(
        "ibverbs transport: rank %d speaks wire version %u, this build %u", p, h.version,
        kWireVersion));
  if (h.nranks != nranks || h.nqps < 1) return in.bad();
  if (h.nqps != nqps)
    return invalidUsage(strFormat("ibverbs: rank %d uses %d queue pairs per peer, this rank %d "
                                  "(WEFT_IB_QPS_PER_PEER must agree)",
                                  p, h.nqps, nqps));
  // left == nranks * nqps * sizeof(QpAddr), without forming the product.
  const size_t row = static_cast<size_t>(nqps) * sizeof(QpAddr);
  if (in.left() % row != 0 || in.left() / row != static_cast<size_t>(nranks)) return in.bad();
  std::vector<QpAddr> mine(static_cast<size_t>(nqps));
  if (!in.skip(static_cast<size_t>(rank) * row) || !in.getArray(mine.data(), mine.size()))
    return in.bad();
  for (const QpAddr& q : mine)
    if (q.qpn == 0 || q.qpn > 0xffffff || q.psn > 0xffffff)
      return invalidArgument(strFormat(
          "ibverbs transport: rank %d published no queue pair for rank %d (QP %u, PSN %u)", p,
          rank, q.qpn, q.psn));
  *hdr = h;
  *qps = std::move(mine);
  return Status::ok();
}

}  // namespace ib
}  // namespace weft
