// The one interface every transport implements (self, shm, tcp; later ucx,
// ibverbs, cuda_ipc). Drawn from UCT's iface/endpoint split and its return
// contract.
//
// A Transport is created per communicator. It publishes an address blob,
// which the communicator allgathers through the bootstrap; connect() then
// makes one Endpoint per reachable peer. An Endpoint moves messages to and
// from one peer:
//
//   * Messages between two ranks are matched in posting order, per direction:
//     the k-th postSend from A to B fills the k-th postRecv at B from A.
//     The progress engine posts in schedule order, so both sides agree.
//   * Each message carries a 64-bit tag. The receiver checks it against the
//     tag of the matching postRecv; a different tag, or a different length,
//     is a protocol error (mismatched collectives) reported with both values.
//   * post* returns: Status::ok()          done now (the completion is set);
//                    Status::inProgress()  the completion fires later, from
//                                          progress();
//                    Status::noResource()  not accepted; the engine retries
//                                          later (queue full);
//                    any error             failed; the message names the peer.
//   * The buffer of a posted operation belongs to the transport until its
//     completion is set. Zero-length messages are valid and still matched.
//   * progress() advances every endpoint without blocking; it returns an
//     error naming the peer when one is lost (connection reset, process
//     gone, garbage on the wire).
//
// Every transport passes tests/transport/conformance.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/cpu.h"
#include "core/hmac.h"
#include "core/status.h"
#include "transports/base/fault_plan.h"

namespace weft {
namespace shm {
class Arena;
}

enum class MemType : uint8_t { Host = 0, Cuda = 1 };

// Set by the transport when a posted operation finishes. The engine polls
// `done`; `status` holds the error when it failed.
struct Completion {
  bool done = false;
  Status status;
  // Telemetry's arrival stamp (src/telemetry/stamp.h): the engine sets it
  // before postSend; a transport that carries it delivers it into the
  // matching receive's completion (before `done`). 0 = none.
  uint64_t stamp = 0;
  void reset() {
    done = false;
    status = Status();
    stamp = 0;
  }
  void finish(Status st = Status()) {
    status = std::move(st);
    done = true;
  }
};

// What the communicator knows about a rank, from the bootstrap.
struct PeerInfo {
  int rank = -1;
  uint64_t hostHash = 0;  // same value <=> same host (hostname, boot id, netns)
  int pid = 0;
  std::string hostname;
  std::vector<uint64_t> cpuMask;  // its affinity mask (core/cpu.h); empty if unknown
};

// The CPUs the ranks of `rank`'s host may run on: the union of their
// affinity masks. Ranks pinned one per core (mpirun --bind-to core,
// weft-perf -B) each see one CPU, yet do not share one: comparing the number
// of local ranks with this, not with one rank's own mask, tells whether they
// really outnumber the cores. Falls back to this process's mask.
inline int hostCpus(const std::vector<PeerInfo>& peers, int rank) {
  std::vector<const std::vector<uint64_t>*> masks;
  for (const PeerInfo& p : peers) {
    if (p.hostHash != peers[rank].hostHash) continue;
    if (p.cpuMask.empty()) return usableCpus();
    masks.push_back(&p.cpuMask);
  }
  const int n = cpusInUnion(masks);
  return n > 0 ? n : usableCpus();
}

// Why a rank's communicator stopped early (Transport::stopped).
enum class StopCause { Mismatch, Revoked };

// Everything a transport needs from its communicator.
struct TransportContext {
  int rank = 0;
  int nranks = 1;
  // This communicator's key (Bootstrap::commKey: derived from the job
  // secret and its rendezvous's nonce). Hellos carry HMACs under it, so
  // peers that do not hold the job secret are refused and the secret never
  // crosses the wire (docs/security.md).
  Key key{};
  uint64_t commId = 0;  // public and unique per communicator (Bootstrap::commId)
  Config config;
  std::vector<PeerInfo> peers;  // indexed by rank, this rank included
  // The RDMA device the topology puts this rank on (its nearest NIC,
  // src/topo/nic_choice.h), "" when it knows none. ibverbs and ucx use it
  // unless WEFT_IB_HCA or UCX_NET_DEVICES say otherwise.
  std::string rdmaNic;
  // Test builds: the faults WEFT_TEST_FAULTS asks this rank's transports to
  // inject (transports/base/fault_plan.h); null otherwise.
  std::shared_ptr<FaultPlan> faults;
};

// The peers a transport is for, which tells the cost model (src/algo/
// select.h) which of its link classes the transport's figures describe:
// this rank itself, the other ranks of its host (the intra class), or ranks
// on other hosts (the inter class: a network transport, which may also
// serve ranks of one host when nothing else does).
enum class LinkScope : uint8_t { Self, IntraHost, InterHost };

struct TransportCaps {
  LinkScope scope = LinkScope::Self;  // every transport sets it
  // The transport of the host arena (arena()): telemetry counts the arena's
  // traffic under it, whether or not this communicator has an arena.
  bool hostArena = false;
  bool hostMemory = true;
  bool cudaMemory = false;
  size_t preferredChunk = 1 << 20;  // bytes per message that keeps it busy
  double bandwidthGBs = 1.0;        // sustained, one direction
  double latencyUs = 10.0;          // one small message, one way
  bool doorbell = false;            // armSleep() works (peers wake this rank)
  // Moving bytes costs the ranks' CPU (kernel socket copies, shared-memory
  // copies by the ranks); false where a NIC or copy engine moves them.
  bool cpuBound = true;
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;
  virtual Status postSend(const void* buf, size_t len, uint64_t tag, MemType mem,
                          Completion* c) = 0;
  virtual Status postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) = 0;
};

// An Endpoint that hands posts to a transport's per-peer object (a channel,
// a connection) held through P: a shared_ptr, or a plain pointer when the
// transport owns the object and outlives the endpoint's use.
template <class P>
class ForwardingEndpoint : public Endpoint {
 public:
  explicit ForwardingEndpoint(P to) : to_(std::move(to)) {}
  Status postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) override {
    return to_->postSend(buf, len, tag, mem, c);
  }
  Status postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) override {
    return to_->postRecv(buf, len, tag, mem, c);
  }

 private:
  P to_;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Whether this transport can connect `ctx.rank` to `peer`.
  virtual bool canReach(const PeerInfo& peer) const = 0;
  virtual TransportCaps caps() const = 0;
  // Opens what peers connect to (listening sockets, shared segments) and
  // returns the address to publish. Called once, before connect().
  virtual Status localAddress(std::string* blob) = 0;
  // Connects to every rank in `peers` (all reachable). `blobs` is indexed by
  // rank and holds every rank's published address. Collective among the
  // listed peers; bounded by the context's bootstrap timeout. On success
  // (*eps)[peer] is set for each listed peer.
  virtual Status connect(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                         std::vector<std::unique_ptr<Endpoint>>* eps) = 0;
  virtual Status progress() = 0;
  // A count that grows whenever progress() moved bytes or handled events,
  // whether or not an operation completed. The engine does not count such
  // rounds as idle: a long message arriving piece by piece then never looks
  // like a wait for a peer that is not running (after which the engine
  // stops spinning and sleeps between the pieces). 0, never growing: the
  // engine sees completions only.
  virtual uint64_t activity() const { return 0; }
  // Called by the engine while it waits without progress for a while: checks
  // that the given peer is still alive (process exists, socket open).
  virtual Status checkPeer(int peer) = 0;
  // Closes everything at once (abort): pending completions are dropped.
  virtual void shutdown() = 0;
  // An fd that becomes readable when progress() may have work (an epoll fd
  // over the sockets), so an idle engine can sleep in poll(); -1 if none.
  virtual int pollFd() const { return -1; }
  // Sleeping on a doorbell, in two halves, so that a thread can sleep
  // without its communicator's lock (Engine::prepareIdle): armSleep() runs
  // under the lock, like progress(); it says whether there is a doorbell and
  // whether there is news already, and leaves in *token what sleepArmed()
  // needs. sleepArmed() runs after it, without the lock, perhaps while
  // another thread runs progress(): it must touch nothing that progress()
  // or shutdown() change. It returns when a peer signals this rank after
  // the arming, or after maxUs.
  enum class Arm { kNoDoorbell, kNews, kArmed };
  virtual Arm armSleep(uint64_t* token) {
    (void)token;
    return Arm::kNoDoorbell;
  }
  virtual void sleepArmed(uint64_t token, int maxUs) {
    (void)token;
    (void)maxUs;
  }
  // Capabilities beyond messages, nullptr where the transport has none.
  // The collective arena of one host (transports/shm/arena.h): set by shm
  // when every rank of the communicator is on this host.
  virtual shm::Arena* arena() { return nullptr; }
  // This rank's communicator stopped: at a mismatch it found (the engine
  // failed with INVALID_USAGE: another rank called something else), or
  // because it was revoked (weft_comm_revoke). Peers must not wait for it
  // until their timeout: tell them, where the transport can (shm: the
  // rank block's marker, which names the cause; tcp: the streams are shut,
  // so peers see the connection closed at once).
  virtual void stopped(StopCause cause) { (void)cause; }
};

// Factories, one per transport folder.
std::unique_ptr<Transport> makeSelfTransport(const TransportContext& ctx);
std::unique_ptr<Transport> makeShmTransport(const TransportContext& ctx);
std::unique_ptr<Transport> makeTcpTransport(const TransportContext& ctx);
// Device memory between ranks of one host (CUDA IPC); needs a usable device.
std::unique_ptr<Transport> makeCudaIpcTransport(const TransportContext& ctx);
// Built only when their libraries are found (WEFT_HAVE_UCX, WEFT_HAVE_IBVERBS).
std::unique_ptr<Transport> makeUcxTransport(const TransportContext& ctx);
// Whether UCX reports an RDMA-capable transport (rc, dc, ud) on this host.
bool ucxHasRdma();
std::unique_ptr<Transport> makeIbverbsTransport(const TransportContext& ctx);
// How many RDMA devices ibv_get_device_list reports here.
int ibverbsDeviceCount();

}  // namespace weft
