// Private to src/bootstrap: the messages of the rendezvous and of the ring,
// and the root thread's entry point. All fields are in host byte order (the
// ranks of one job run the same build on one architecture).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "net/socket.h"

namespace weft {
namespace boot {

constexpr uint32_t kWireVersion = 1;
constexpr uint32_t kRootHelloMagic = 0x57424831;  // "WBH1": rank -> root
constexpr uint32_t kRootReplyMagic = 0x57425231;  // "WBR1": root -> rank
constexpr uint32_t kRingHelloMagic = 0x57424731;  // "WBG1": rank -> rank+1
constexpr uint32_t kFrameMagic = 0x57424631;      // "WBF1": allgather frame

// A connection must deliver its complete hello within this many seconds.
constexpr double kHelloTimeoutS = 5.0;
// At most this many connections may wait for their hello at once.
constexpr size_t kMaxPendingConns = 1024;

// Rank -> root, right after connecting.
struct RootHello {
  uint32_t magic;
  uint32_t version;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  unsigned char addr[net::Address::kPackedSize];  // the rank's ring listen address
};
static_assert(sizeof(RootHello) == 56, "RootHello layout");

// Root -> rank: the header of the rank table (code 0, payload = nranks
// packed addresses in rank order) or of an error (code = weft_result_t,
// payload = the message).
struct RootReply {
  uint32_t magic;
  int32_t code;
  uint32_t nranks;
  uint32_t payloadBytes;
};
static_assert(sizeof(RootReply) == 16, "RootReply layout");
constexpr uint32_t kMaxErrorPayload = 64 * 1024;

// Rank -> rank+1, right after connecting the ring.
struct RingHello {
  uint32_t magic;
  uint32_t version;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
};
static_assert(sizeof(RingHello) == 24, "RingHello layout");

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
// (which it then owns) within `timeoutS`. `addr` names it in logs.
Status startRoot(int listenFd, const net::Address& addr, uint64_t secret, double timeoutS);

}  // namespace boot
}  // namespace weft
