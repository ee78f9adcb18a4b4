// The frames of weft_comm_shrink's agreement (agree.h): what the survivors
// of a communicator send each other over TCP, at the addresses of its
// bootstrap. Every frame is a fixed header, a payload of ranks (and, for a
// decision, the new root's address and a nonce), and an HMAC-SHA256 under
// the communicator's key over both, so that only ranks of this
// communicator can take part. Pure encoding and checking, fuzzed
// (tests/fuzz/fuzz_agree.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/hmac.h"

namespace weft {
namespace agree {

enum class Kind : uint8_t {
  Propose = 1,   // member -> coordinator: the ranks it counts as gone
  Wait = 2,      // coordinator -> member: heard you; collecting the others
  Decide = 3,    // coordinator -> member: the members, the new comm's root
  Excluded = 4,  // coordinator -> a rank left out (too late, or given up on)
  Revoked = 5,   // any rank -> the others: it revoked the communicator
  Stuck = 6,     // any rank -> the others: it timed out waiting for these ranks
};

struct Frame {
  Kind kind = Kind::Wait;
  int32_t from = 0;     // the sender's rank in the parent
  uint32_t attempt = 0; // the how-many-th shrink of the parent this is
  std::vector<int32_t> ranks;  // Propose: gone; Decide: the members, ascending; Stuck: stuck
  unsigned char root[32] = {};  // Decide: net::Address::pack of the new root
  Nonce nonce{};                // Decide: the new comm's secret derives from it
};

constexpr uint32_t kMagic = 0x57414752;  // "WAGR"
constexpr size_t kHeaderBytes = 32;

// The whole frame, MAC included.
std::string encode(const Key& key, uint64_t commId, const Frame& f);
// Checks a header (kHeaderBytes) against this communicator: magic, comm id,
// kind, sender in [0, nranks), payload length within what `nranks` allows.
// "" and *payloadLen on success; else why the header is refused.
std::string checkHeader(const uint8_t* header, uint64_t commId, int nranks, size_t* payloadLen);
// Checks the MAC over header and payload and decodes them (header already
// checked). "" on success; else why the frame is refused.
std::string decode(const Key& key, const uint8_t* header, const uint8_t* payload, size_t len,
                   const uint8_t* mac, int nranks, Frame* out);

}  // namespace agree
}  // namespace weft
