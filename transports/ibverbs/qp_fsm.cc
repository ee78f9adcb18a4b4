#include "transports/ibverbs/qp_fsm.h"

#include <algorithm>

#include "core/log.h"

namespace weft {
namespace ib {

const char* qpStateName(QpState s) {
  switch (s) {
    case QpState::Reset:
      return "RESET";
    case QpState::Init:
      return "INIT";
    case QpState::Rtr:
      return "RTR";
    case QpState::Rts:
      return "RTS";
    case QpState::Error:
      return "ERROR";
  }
  return "?";
}

int commonMtu(int localMtu, int remoteMtu) {
  int m = std::min(localMtu, remoteMtu);
  if (m < 256) return 0;
  int p = 256;
  while (p * 2 <= m && p < 4096) p *= 2;
  return p;
}

Status QpFsm::plan(QpState to, const RemoteQp* remote, uint32_t* attrs) const {
  auto illegal = [&] {
    return invalidUsage(strFormat("queue pair: no transition from %s to %s", qpStateName(state_),
                                  qpStateName(to)));
  };
  switch (to) {
    case QpState::Init:
      if (state_ != QpState::Reset) return illegal();
      *attrs = kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccess;
      return Status::ok();
    case QpState::Rtr:
      if (state_ != QpState::Init) return illegal();
      if (!remote) return invalidArgument("queue pair: RTR needs the remote QP");
      if (remote->qpn == 0 || remote->qpn > 0xffffff)
        return invalidArgument(strFormat("queue pair: bad remote QP number %u", remote->qpn));
      if (remote->psn > 0xffffff)
        return invalidArgument(strFormat("queue pair: bad remote PSN %u", remote->psn));
      if (!remote->useGid && remote->lid == 0)
        return invalidArgument("queue pair: the remote has neither a LID nor a GID");
      if (remote->useGid && std::all_of(remote->gid, remote->gid + 16, [](uint8_t b) { return b == 0; }))
        return invalidArgument("queue pair: the remote GID is zero");
      if (commonMtu(remote->mtu, remote->mtu) != remote->mtu)
        return invalidArgument(strFormat("queue pair: bad remote MTU %d", remote->mtu));
      *attrs = kAttrState | kAttrPath | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
               kAttrMaxDestRdAtomic | kAttrMinRnrTimer;
      return Status::ok();
    case QpState::Rts:
      if (state_ != QpState::Rtr) return illegal();
      *attrs = kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
               kAttrMaxQpRdAtomic;
      return Status::ok();
    case QpState::Error:
      *attrs = kAttrState;
      return Status::ok();
    case QpState::Reset:
      if (state_ == QpState::Reset) return illegal();
      *attrs = kAttrState;
      return Status::ok();
  }
  return illegal();
}

}  // namespace ib
}  // namespace weft
