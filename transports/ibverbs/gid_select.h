// RoCE GID selection (WEFT_IB_GID_INDEX): a port's GID table holds one
// entry per address and RoCE version; peers must use matching entries.
// Auto picks, in order: RoCE v2 with an IPv4-mapped address (routable, what
// most RoCE fabrics use), RoCE v2 with a global IPv6 address, RoCE v1, then
// anything non-zero. On InfiniBand ports the LID addresses the path and
// index 0 is used. Pure code, unit-tested without a device.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace weft {
namespace ib {

enum class GidType { Ib, RoceV1, RoceV2 };

struct GidEntry {
  int index = 0;
  GidType type = GidType::Ib;
  uint8_t gid[16] = {};
};

// The index to use: `forced` (>= 0, from WEFT_IB_GID_INDEX) when the table
// has a non-zero entry there, else an error naming it; -1 picks as above.
// `ethernet`: the port's link layer is Ethernet (RoCE).
Status selectGid(const std::vector<GidEntry>& table, bool ethernet, int forced, int* index);

bool gidIsZero(const uint8_t* gid);
bool gidIsIpv4Mapped(const uint8_t* gid);
bool gidIsLinkLocal(const uint8_t* gid);

}  // namespace ib
}  // namespace weft
