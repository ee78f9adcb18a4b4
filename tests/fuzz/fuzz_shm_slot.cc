// Fuzz target: what the shm transport reads from memory another process
// writes: a FIFO segment's header (layoutProblem, checked by the sender in
// Segment::open before it trusts slotStride and slotBytes) and each slot's
// header (slotMatches / slotError, checked by the receiver of every slot).
//
// Input: a FifoHeader's bytes, the mapped size, then a SlotHeader's bytes
// and what the receiver posted.
// Checks: a header that passes puts every slot (header and slotBytes of
// payload, slotStride apart) inside the mapping, computed here in 128 bits;
// a slot that does not match gets an error status and never crashes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "transports/shm/shm_segment.h"

using weft::shm::FifoHeader;
using weft::shm::SlotHeader;

namespace {

struct Input {
  const uint8_t* p;
  size_t n;
  void take(void* out, size_t len) {
    memset(out, 0, len);
    size_t k = len < n ? len : n;
    memcpy(out, p, k);
    p += k;
    n -= k;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  alignas(FifoHeader) unsigned char raw[sizeof(FifoHeader)];
  in.take(raw, sizeof raw);
  const FifoHeader& h = *std::launder(reinterpret_cast<FifoHeader*>(raw));
  uint64_t mapped = 0;
  int32_t src = 0, dst = 0;
  in.take(&mapped, sizeof mapped);
  in.take(&src, sizeof src);
  in.take(&dst, sizeof dst);
  if (weft::shm::layoutProblem(h, src, dst, mapped).empty()) {
    using u128 = unsigned __int128;
    const u128 end = static_cast<u128>(sizeof(FifoHeader)) +
                     static_cast<u128>(h.slots - 1) * h.slotStride + sizeof(SlotHeader) +
                     h.slotBytes;
    if (end > mapped || h.slotStride < sizeof(SlotHeader) + h.slotBytes) abort();
  }

  SlotHeader s;
  in.take(&s, sizeof s);
  uint64_t msgNo = 0, tag = 0, len = 0, part = 0;
  in.take(&msgNo, sizeof msgNo);
  in.take(&tag, sizeof tag);
  in.take(&len, sizeof len);
  in.take(&part, sizeof part);
  if (!weft::shm::slotMatches(s, msgNo, tag, len, part)) {
    weft::Status st = weft::shm::slotError("shm", s, 0, 1, "rank 1 (pid 2)", msgNo, tag, len, part);
    if (st.isOk() || st.message().empty()) abort();
  }
  return 0;
}
