// The life of an RC queue pair, as pure logic: which state may follow which,
// and which attributes each transition must set (the verbs code maps these
// onto IBV_QP_* masks). Kept apart from the verbs header so that it is
// unit-tested on machines without an RDMA device.
//
//   Reset -> Init (port, pkey, access) -> Rtr (the remote QP's number, PSN,
//   path: LID or GID, MTU) -> Rts (own PSN, timeouts, retries)
//   any -> Error (a failed work request, or shutdown); Error -> Reset
#pragma once

#include <cstdint>

#include "core/status.h"

namespace weft {
namespace ib {

enum class QpState { Reset, Init, Rtr, Rts, Error };
const char* qpStateName(QpState s);

// Attributes a transition sets (weft's own bits; ibverbs_peer.cc maps them).
enum QpAttr : uint32_t {
  kAttrState = 1u << 0,
  kAttrPkeyIndex = 1u << 1,
  kAttrPort = 1u << 2,
  kAttrAccess = 1u << 3,
  kAttrPath = 1u << 4,  // address vector: LID or GID, hop limit, traffic class
  kAttrPathMtu = 1u << 5,
  kAttrDestQpn = 1u << 6,
  kAttrRqPsn = 1u << 7,
  kAttrMaxDestRdAtomic = 1u << 8,
  kAttrMinRnrTimer = 1u << 9,
  kAttrSqPsn = 1u << 10,
  kAttrTimeout = 1u << 11,
  kAttrRetryCnt = 1u << 12,
  kAttrRnrRetry = 1u << 13,
  kAttrMaxQpRdAtomic = 1u << 14,
};

// What a QP needs to know of its remote partner before Rtr.
struct RemoteQp {
  uint32_t qpn = 0;  // 24 bits, non-zero
  uint32_t psn = 0;  // 24 bits
  uint16_t lid = 0;  // InfiniBand: non-zero
  bool useGid = false;  // RoCE (and routed IB): the GID addresses the path
  uint8_t gid[16] = {};
  int mtu = 0;  // bytes: 256 .. 4096
};

class QpFsm {
 public:
  QpState state() const { return state_; }
  // Each returns the attributes to set for the move, or an error naming
  // the illegal transition or the bad remote value; the state changes only
  // once the caller reports success with commit().
  Status plan(QpState to, const RemoteQp* remote, uint32_t* attrs) const;
  void commit(QpState to) { state_ = to; }

 private:
  QpState state_ = QpState::Reset;
};

// The path MTU both ends support: the smaller, rounded down to a power of
// two in 256..4096; 0 when either is out of range.
int commonMtu(int localMtu, int remoteMtu);

}  // namespace ib
}  // namespace weft
