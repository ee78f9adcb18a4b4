// Arrival stamps: "the latest entry into this op that I know of, and whose
// it was", in one 64-bit word that rides on messages already exchanged (the
// transports carry Completion::stamp; the shm arena keeps it next to its
// flag). Each rank starts an op with its own entry; every send carries the
// latest stamp the rank has seen in that op; every receive keeps the later
// of the two. When a collective's data has passed through every rank, each
// rank knows the last rank to arrive and when: that is the arrival skew,
// measured without a message of its own.
//
// Layout: bits 63..20 the entry time on the communicator's common clock
// (Clock::global, units of 64 ns, modulo 2^44, which is 13 days), bits
// 19..0 the rank plus one (0 = no stamp: a transport that does not carry
// stamps). Times compare modulo 2^44, so the wrap is harmless as long as
// two entries into one op are less than 6 days apart.
#pragma once

#include <cstdint>

namespace weft {
namespace telemetry {

constexpr int kStampRankBits = 20;
constexpr uint64_t kStampRankMask = (1ull << kStampRankBits) - 1;
constexpr int kStampUnitShift = 6;  // 64 ns

inline uint64_t makeStamp(uint64_t globalNs, int rank) {
  return (globalNs >> kStampUnitShift) << kStampRankBits |
         (static_cast<uint64_t>(rank + 1) & kStampRankMask);
}
inline bool hasStamp(uint64_t s) { return (s & kStampRankMask) != 0; }
inline int stampRank(uint64_t s) { return static_cast<int>(s & kStampRankMask) - 1; }
// The stamp's time in ns, reconstructed near `nearNs` (a global time within
// days of it), so that the 44-bit wrap disappears.
inline uint64_t stampNs(uint64_t s, uint64_t nearNs) {
  const uint64_t units = s >> kStampRankBits;
  const uint64_t nearUnits = nearNs >> kStampUnitShift;
  const uint64_t mask = (1ull << (64 - kStampRankBits)) - 1;
  int64_t diff = static_cast<int64_t>((units - nearUnits) & mask);
  if (diff >= static_cast<int64_t>(mask >> 1)) diff -= static_cast<int64_t>(mask) + 1;
  return (nearUnits + static_cast<uint64_t>(diff)) << kStampUnitShift;
}
// Of two stamps, the later entry (ties: the higher rank, so every rank
// picks the same one); a missing stamp loses.
inline uint64_t laterStamp(uint64_t a, uint64_t b) {
  if (!hasStamp(a)) return b;
  if (!hasStamp(b)) return a;
  const uint64_t mask = (1ull << (64 - kStampRankBits)) - 1;
  const uint64_t ua = a >> kStampRankBits, ub = b >> kStampRankBits;
  const int64_t d = static_cast<int64_t>((ua - ub) & mask);
  const bool aLater = d != 0 ? d < static_cast<int64_t>(mask >> 1) : (a & kStampRankMask) > (b & kStampRankMask);
  return aLater ? a : b;
}

}  // namespace telemetry
}  // namespace weft
