// Private to src/bootstrap: the messages of the rendezvous and of the ring,
// and the root thread's entry point. All fields are in host byte order (the
// ranks of one job run the same build on one architecture).
#pragma once

#include <cstdint>
#include <string>

#include "core/hmac.h"
#include "core/status.h"
#include "net/socket.h"

namespace weft {
namespace boot {

// Version 2: connections prove knowledge of the job secret by HMAC-SHA256
// (src/core/hmac.h) instead of sending it (docs/security.md).
constexpr uint32_t kWireVersion = 2;
constexpr uint32_t kRootChallengeMagic = 0x57424332;  // "WBC2": root -> rank, at accept
constexpr uint32_t kRootHelloMagic = 0x57424832;      // "WBH2": rank -> root
constexpr uint32_t kRootReplyMagic = 0x57425232;      // "WBR2": root -> rank
constexpr uint32_t kRingHelloMagic = 0x57424732;      // "WBG2": rank -> rank+1
constexpr uint32_t kFrameMagic = 0x57424631;          // "WBF1": allgather frame

// A connection must deliver its complete hello within this many seconds.
constexpr double kHelloTimeoutS = 5.0;
// At most this many connections may wait for their hello at once.
constexpr size_t kMaxPendingConns = 1024;

// Root -> rank, as soon as the root accepts: a fresh nonce the rank's hello
// must answer.
struct RootChallenge {
  uint32_t magic;
  uint32_t version;
  uint8_t nonce[kNonceBytes];
};
static_assert(sizeof(RootChallenge) == 24, "RootChallenge layout");

// Rank -> root, in answer to the challenge. `mac`: rootHelloMac().
struct RootHello {
  uint32_t magic;
  uint32_t version;
  uint8_t nonce[kNonceBytes];  // the rank's: the root's reply answers it
  int32_t rank;
  int32_t nranks;
  unsigned char addr[net::Address::kPackedSize];  // the rank's ring listen address
  uint8_t mac[kMacBytes];
};
static_assert(sizeof(RootHello) == 96, "RootHello layout");

// Root -> rank: the header of the rank table (code 0, payload = the
// rendezvous's session nonce, then nranks packed addresses in rank order)
// or of an error (code = weft_result_t, payload = the message); then
// rootReplyMac() over header and payload, so that the rank knows the root
// holds the job secret (a rank with another secret cannot check it, and
// says so with the root's message).
struct RootReply {
  uint32_t magic;
  int32_t code;
  uint32_t nranks;
  uint32_t payloadBytes;
};
static_assert(sizeof(RootReply) == 16, "RootReply layout");
constexpr uint32_t kMaxErrorPayload = 64 * 1024;

// Rank -> rank+1, right after connecting the ring. `mac`: ringHelloMac(),
// bound to the rendezvous's session nonce, so it is good for this ring alone.
struct RingHello {
  uint32_t magic;
  uint32_t version;
  int32_t rank;
  int32_t nranks;
  uint8_t mac[kMacBytes];
};
static_assert(sizeof(RingHello) == 48, "RingHello layout");

// The MACs of the messages above, under the job key (jobKey(secret)).
inline Mac rootHelloMac(const Key& k, const uint8_t* rootNonce, const RootHello& h) {
  return hmacSha256(k, {{"weft root hello", 16}, {rootNonce, kNonceBytes},
                        {h.nonce, kNonceBytes}, MacPart::of(h.rank), MacPart::of(h.nranks),
                        {h.addr, sizeof h.addr}});
}
inline Mac rootReplyMac(const Key& k, const uint8_t* rankNonce, const uint8_t* rootNonce,
                        const void* frame, size_t len) {
  return hmacSha256(k, {{"weft root reply", 16}, {rankNonce, kNonceBytes},
                        {rootNonce, kNonceBytes}, {frame, len}});
}
inline Mac ringHelloMac(const Key& k, const Nonce& session, int32_t rank, int32_t nranks) {
  return hmacSha256(k, {{"weft ring hello", 16}, {session.data(), session.size()},
                        MacPart::of(rank), MacPart::of(nranks)});
}

// Every allgather block travels behind this header.
struct FrameHeader {
  uint32_t magic;
  int32_t origin;  // the rank whose blob follows
  uint64_t round;  // Bootstrap::round_ of the sender
  uint64_t len;    // payload bytes
};
static_assert(sizeof(FrameHeader) == 24, "FrameHeader layout");
constexpr uint64_t kMaxBlobBytes = 1ull << 30;

// "rank 2" / "ranks 2,3" / "ranks 0-5,9": for messages that list ranks.
std::string rankList(const int* ranks, size_t n);

// Starts the detached root thread serving one rendezvous on `listenFd`
// (which it then owns) within `timeoutS`. `addr` names it in logs; only
// ranks holding `secret` are let in.
Status startRoot(int listenFd, const net::Address& addr, uint64_t secret, double timeoutS);

}  // namespace boot
}  // namespace weft
