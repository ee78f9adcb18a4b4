// Where one op's work goes: which endpoint set carries its transfers, with
// which MemType they are posted, and which local-work backend runs its
// reduce / copy / divide steps. A pure function of what the engine knows
// about the op and itself, so the CPU tests check every case with a table
// (tests/exec/placement_test.cc) and the engine only applies the answer.
//
// The endpoint sets: the host ones (self, shm, tcp, ...), and on a
// communicator whose ranks all share one host and CUDA IPC, a cuda_ipc
// endpoint per other rank (docs/cuda.md). Every stream-ordered op of such a
// communicator moves its data through cuda_ipc, staged or direct, so that
// two ranks never disagree on which FIFO carries a message: staging is
// mapped pinned memory, which cuda_ipc's copies read and write as well.
// Host-memory ops keep the host endpoints. The engine holds both sets in a
// Routes and asks it, per transfer step, where to post.
#pragma once

#include <string>
#include <vector>

#include "algo/schedule.h"
#include "core/status.h"
#include "exec/op.h"
#include "transports/transport.h"

namespace weft {

enum class LocalRun : uint8_t {
  Host,         // the host executor, inline
  Local,        // the engine's general backend (tests' async host backend)
  StreamLocal,  // the stream ops' backend (WEFT_CUDA_LOCAL_WORK=gpu)
  DeviceLocal,  // the direct path's GPU backend (device scratch)
};

struct PlacementFacts {
  bool streamOp = false;         // stream-ordered (its tracker has a gate)
  bool directOp = false;         // on the user's device buffers, no staging
  bool deviceEndpoints = false;  // the engine has cuda_ipc endpoints
  bool haveLocal = false, haveStreamLocal = false, haveDeviceLocal = false;
};

struct OpPlacement {
  bool deviceEndpoints = false;  // transfers to other ranks on the cuda_ipc endpoints
  MemType mem = MemType::Host;   // ... posted with this
  LocalRun local = LocalRun::Host;
};

// An error (INTERNAL) for a direct op the engine cannot run: no GPU
// backend, or no cuda_ipc endpoints on a communicator of several ranks.
Status placeOp(const PlacementFacts& f, int nranks, OpPlacement* out);

// How step `s` of an op placed `p` on rank `rank` is posted: on the device
// endpoint of s.peer (with p.mem) or on the host one (MemType::Host). A
// transfer to this rank itself always takes the host self endpoint (no
// cuda_ipc endpoint to oneself): staged memory is host memory, and the
// device path refuses calls that send to themselves (src/cuda/device_path.h).
struct StepRoute {
  bool device = false;
  MemType mem = MemType::Host;
};
StepRoute routeStep(const OpPlacement& p, const Step& s, int rank);

// Checks, before an op is queued, that every transfer of `sched` placed `p`
// has an endpoint (deviceEps[peer] set for those routed to cuda_ipc); an
// INTERNAL error naming the first peer without one.
Status checkRoutes(const OpPlacement& p, const Schedule& sched, int rank,
                   const std::vector<Endpoint*>& deviceEps);

// An engine's two endpoint sets by rank, and where each transfer step of an
// op placed by placeOp (Op::deviceEps, Op::mem) is posted: routeStep's
// answer, on these endpoints.
class Routes {
 public:
  // hostEps[peer]: the host endpoint of every rank, this rank's own included.
  Routes(int rank, std::vector<Endpoint*> hostEps) : rank_(rank), host_(std::move(hostEps)) {}
  // The cuda_ipc endpoints by rank (nullptr for this rank and unreached
  // ones). Before any op.
  void setDevice(std::vector<Endpoint*> eps);
  // Some rank has a cuda_ipc endpoint (PlacementFacts::deviceEndpoints).
  bool anyDevice() const { return !device_.empty(); }
  // checkRoutes on this engine's cuda_ipc endpoints.
  Status check(const OpPlacement& p, const Schedule& sched) const {
    return checkRoutes(p, sched, rank_, device_);
  }
  struct Post {
    Endpoint* ep;
    MemType mem;
  };
  // Transfer step `s` of `op`: its endpoint and MemType. Host ops (all but
  // the stream-ordered ones of a one-host comm with CUDA IPC) take the host
  // set without asking routeStep.
  Post post(const Op& op, const Step& s) const {
    return op.deviceEps ? devicePost(op, s) : Post{host_[s.peer], MemType::Host};
  }

 private:
  Post devicePost(const Op& op, const Step& s) const;
  int rank_;
  std::vector<Endpoint*> host_;
  std::vector<Endpoint*> device_;  // empty when no rank has one
};

}  // namespace weft
