// What a communicator takes from the topology, in one place so that
// src/api/comm.cc calls it at four points and does nothing else with it:
//   setUpCommTopology   at init, after the peers are known: the System
//                       (WEFT_TOPO_FILE, else detected once per process),
//                       the View of this host, and the ring order all ranks
//                       agree on (one bootstrap allgather)
//   transportOrder      which transports to try for a peer, by path class
//   applyToCostModel    the cost model's link figures, capped by the graph
//   buildScheduleInRingOrder  schedules built on the View's ring
// Transports and algorithms never detect anything themselves.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algo/select.h"
#include "core/config.h"
#include "topo/view.h"
#include "transports/transport.h"

namespace weft {
namespace topo {

struct CommTopology {
  std::shared_ptr<const System> system;  // this host's
  std::string source;                    // "WEFT_TOPO_FILE=..." or "detected"
  View view;                             // this host's ranks, nodes = hosts
  int hosts = 1;
  int localRank = 0;  // this rank's index among its host's ranks (the View's local rank)
  // Every rank in ring order (hosts in order of their lowest rank, each
  // host's ranks in the order its own View chains them); ringPos inverts it.
  std::vector<int> ringOrder, ringPos;
  bool reordered = false;  // ringOrder differs from 0, 1, ..., n-1
  // One host, n >= 4 ranks, n/2 a power of two, and ring positions 2i and
  // 2i+1 bound to the same single CPU, a different one per pair: two ranks
  // per core (recursive doubling then folds the pairs, BuildParams::foldPairs).
  bool pairedCores = false;
  // Per rank: the path class from this rank's device to the peer's (same
  // host), Loc for itself, None for a rank on another host.
  std::vector<PathClass> peerClass;
};

using Allgather = std::function<Status(const std::string& mine, std::vector<std::string>* all)>;

// Builds *out for `rank` of `peers`. `allgather` exchanges one string per
// rank (each host's ring chain, so that all ranks use the same order even
// when hosts differ). A WEFT_TOPO_FILE that does not load is
// WEFT_ERR_INVALID_ARGUMENT naming the file; a failed detection is a
// warning and a one-socket system. The lowest rank of each host writes
// WEFT_TOPO_DUMP_FILE (%h = host name, %p = pid) once per process.
Status setUpCommTopology(const Config& cfg, const std::vector<PeerInfo>& peers, int rank,
                         const Allgather& allgather, CommTopology* out);

// Indices into `cands`, in the order to try them for `peer`: self for this
// rank; for a peer on this host, whatever its path class (host memory goes
// through shared memory from any NUMA node; a GPU transport would take NVL,
// PIX and PXB peers first), shm then tcp; for another host, ibverbs, ucx,
// then tcp (the communicator builds the RDMA ones only where asked for or,
// for ucx, where UCX found an RDMA device). Transports the rule does not
// name follow in their given order.
std::vector<size_t> transportOrder(const CommTopology& t,
                                   const std::vector<std::unique_ptr<Transport>>& cands, int peer);

// Caps the model's link figures by the graph where it knows them: intra
// bandwidth by the ring bandwidth of this host's ranks; inter bandwidth by
// the NICs the channels use (when their speed is known), inter latency
// raised to theirs.
void applyToCostModel(const CommTopology& t, CostModel* m);

// buildSchedule, except for a ring allreduce, a chain reduce and a chain
// broadcast up to 32 KiB when the ring order differs from rank order: then the schedule is
// built for this rank's position in the ring (the root's position for the
// root) and its peers are mapped back to ranks. Allreduce leaves the same
// result on every rank and a chain moves the whole buffer, so only the
// neighbours change; collectives whose blocks belong to ranks (allgather,
// reduce-scatter) keep rank order. With pairedCores, recursive doubling
// allreduce too, its pairs folded (BuildParams::foldPairs).
Status buildScheduleInRingOrder(const CommTopology& t, const CollArgs& args, const BuildParams& p,
                                Schedule* out);

}  // namespace topo
}  // namespace weft
