#include "exec/placement.h"

#include <algorithm>

namespace weft {

Status placeOp(const PlacementFacts& f, int nranks, OpPlacement* out) {
  OpPlacement p;
  if (f.directOp) {
    // The user's device buffers: only GPU kernels and cuda_ipc touch them.
    if (!f.streamOp) return Status(WEFT_ERR_INTERNAL, "a direct device op must be stream-ordered");
    if (!f.haveDeviceLocal)
      return Status(WEFT_ERR_INTERNAL, "direct device op, but this engine has no GPU backend");
    if (nranks > 1 && !f.deviceEndpoints)
      return Status(WEFT_ERR_INTERNAL,
                    "direct device op, but this engine has no cuda_ipc endpoints");
    p.deviceEndpoints = nranks > 1;
    p.mem = MemType::Cuda;
    p.local = LocalRun::DeviceLocal;
  } else if (f.streamOp) {
    // Staged: pinned host staging, device-reachable. Through cuda_ipc when
    // the comm has it (every rank's stream ops then agree on the FIFO).
    p.deviceEndpoints = f.deviceEndpoints && nranks > 1;
    p.mem = p.deviceEndpoints ? MemType::Cuda : MemType::Host;
    p.local = f.haveStreamLocal ? LocalRun::StreamLocal
                                : (f.haveLocal ? LocalRun::Local : LocalRun::Host);
  } else {
    p.local = f.haveLocal ? LocalRun::Local : LocalRun::Host;
  }
  *out = p;
  return Status();
}

StepRoute routeStep(const OpPlacement& p, const Step& s, int rank) {
  StepRoute r;
  const bool xfer =
      s.kind == StepKind::Send || s.kind == StepKind::Recv || s.kind == StepKind::RecvReduce;
  if (!xfer || !p.deviceEndpoints || s.peer == rank) return r;
  r.device = true;
  r.mem = p.mem;
  return r;
}

Status checkRoutes(const OpPlacement& p, const Schedule& sched, int rank,
                   const std::vector<Endpoint*>& deviceEps) {
  for (const Step& s : sched.steps) {
    const bool xfer =
        s.kind == StepKind::Send || s.kind == StepKind::Recv || s.kind == StepKind::RecvReduce;
    if (!xfer) continue;
    const StepRoute r = routeStep(p, s, rank);
    if (p.mem == MemType::Cuda && s.peer == rank && p.local == LocalRun::DeviceLocal)
      return Status(
          WEFT_ERR_INTERNAL,
          strFormat("rank %d: a direct device op sends to itself (no device self endpoint)", rank));
    if (r.device &&
        (s.peer < 0 || static_cast<size_t>(s.peer) >= deviceEps.size() || !deviceEps[s.peer]))
      return Status(WEFT_ERR_INTERNAL,
                    strFormat("rank %d: no cuda_ipc endpoint to rank %d", rank, s.peer));
  }
  return Status();
}

void Routes::setDevice(std::vector<Endpoint*> eps) {
  eps.resize(host_.size(), nullptr);
  const bool any = std::any_of(eps.begin(), eps.end(), [](Endpoint* e) { return e != nullptr; });
  device_ = any ? std::move(eps) : std::vector<Endpoint*>();
}

Routes::Post Routes::devicePost(const Op& op, const Step& s) const {
  OpPlacement p;
  p.deviceEndpoints = true;
  p.mem = op.mem;
  const StepRoute r = routeStep(p, s, rank_);
  return Post{r.device ? device_[s.peer] : host_[s.peer], r.mem};
}

}  // namespace weft
