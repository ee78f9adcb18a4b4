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
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/hmac.h"

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

}  // namespace ib
}  // namespace weft
