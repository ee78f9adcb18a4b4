#include "transports/ibverbs/gid_select.h"

#include "core/log.h"

namespace weft {
namespace ib {

bool gidIsZero(const uint8_t* gid) {
  for (int i = 0; i < 16; ++i)
    if (gid[i]) return false;
  return true;
}

bool gidIsIpv4Mapped(const uint8_t* gid) {
  for (int i = 0; i < 10; ++i)
    if (gid[i]) return false;
  return gid[10] == 0xff && gid[11] == 0xff;
}

bool gidIsLinkLocal(const uint8_t* gid) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

Status selectGid(const std::vector<GidEntry>& table, bool ethernet, int forced, int* index) {
  if (forced >= 0) {
    for (const GidEntry& e : table)
      if (e.index == forced && !gidIsZero(e.gid)) {
        *index = forced;
        return Status::ok();
      }
    return invalidArgument(
        strFormat("WEFT_IB_GID_INDEX=%d: the port has no GID at that index", forced));
  }
  if (!ethernet) {
    *index = 0;
    return Status::ok();
  }
  // Lower rank = better; ties go to the lower index.
  auto rank = [](const GidEntry& e) {
    if (gidIsZero(e.gid)) return 99;
    if (e.type == GidType::RoceV2 && gidIsIpv4Mapped(e.gid)) return 0;
    if (e.type == GidType::RoceV2 && !gidIsLinkLocal(e.gid)) return 1;
    if (e.type == GidType::RoceV1) return 2;
    return 3;
  };
  int best = 99;
  for (const GidEntry& e : table) {
    int r = rank(e);
    if (r < best || (r == best && r < 99 && e.index < *index)) {
      best = r;
      *index = e.index;
    }
  }
  if (best == 99) return Status(WEFT_ERR_SYSTEM, "RoCE port without any usable GID (no IP address?)");
  return Status::ok();
}

}  // namespace ib
}  // namespace weft
