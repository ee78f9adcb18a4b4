// The ucx transport: weft's Endpoint contract over UCP tagged messages. One
// UCP context and worker per communicator, one endpoint per peer, created
// from the worker addresses the communicator allgathers; connect() then
// trades a Hello with every peer so that a communicator starts only with
// working, authenticated endpoints. Which wires UCP uses (tcp, shared memory,
// InfiniBand, RoCE) is UCX's choice, steered by its own UCX_TLS and
// UCX_NET_DEVICES.
//
// Liveness: endpoints use UCP's peer error mode, so a lost connection fails
// its requests and names the peer; peers on this host are also watched by
// pid, because UCX's shared-memory transports do not notice a dead peer.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "core/clock.h"
#include "core/log.h"
#include "transports/base/blob.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_peer.h"
#include "transports/ucx/ucx_tls.h"
#include "transports/ucx/ucx_wire.h"

namespace weft {
namespace ucx {
namespace {

using UcxEndpoint = ForwardingEndpoint<UcxPeer*>;

class UcxTransport : public Transport {
 public:
  explicit UcxTransport(const TransportContext& ctx) : ctx_(ctx) {
    hostHash_ = static_cast<size_t>(ctx.rank) < ctx.peers.size() ? ctx.peers[ctx.rank].hostHash : 0;
    sh_.rank = ctx.rank;
    sh_.faults = ctx.faults;
  }
  ~UcxTransport() override {
    shutdown();
    // The worker goes first: nothing may call back into a peer after that.
    if (sh_.worker) ucp_worker_destroy(sh_.worker);
    peers_.clear();
    if (context_) ucp_cleanup(context_);
  }

  const char* name() const override { return "ucx"; }
  bool canReach(const PeerInfo& peer) const override {
    return peer.rank != ctx_.rank && ctx_.nranks <= kMaxRanks;
  }
  TransportCaps caps() const override {
    TransportCaps c;
    c.scope = LinkScope::InterHost;
    c.preferredChunk = 1 << 20;
    // Static figures until the topology supplies measured ones: UCX over
    // TCP is about as fast as weft's tcp; over RDMA far faster.
    c.bandwidthGBs = rdma_ ? 10.0 : 1.0;
    c.latencyUs = rdma_ ? 3.0 : 20.0;
    c.cpuBound = !rdma_;
    return c;
  }

  Status localAddress(std::string* blob) override;
  Status connect(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                 std::vector<std::unique_ptr<Endpoint>>* eps) override;
  Status progress() override {
    if (!sh_.worker || down_) return Status::ok();
    // Once per call: the engine looks at its ops right after, and calls
    // again while they wait. Looping while UCP reports events cost one more
    // poll of its sockets (a system call) after every completion, on the
    // critical path of small collectives.
    activity_ += ucp_worker_progress(sh_.worker);  // events handled
    ++sh_.rounds;
    for (UcxPeer* p : sh_.lost) p->sweepLost();
    return sh_.sticky;
  }
  uint64_t activity() const override { return activity_; }
  Status checkPeer(int peer) override {
    if (peer < 0 || static_cast<size_t>(peer) >= peers_.size() || !peers_[peer])
      return Status::ok();
    return peers_[peer]->check();
  }
  void shutdown() override;
  // Stopped early (a mismatch, a revoke): nothing is left to deliver, and
  // the peers may no longer progress their workers: shutdown flushes nothing.
  void stopped(StopCause) override { abandoned_ = true; }
  Arm armSleep(uint64_t* token) override;
  void sleepArmed(uint64_t token, int maxUs) override;

 private:
  Status init();
  Status hello(const std::vector<int>& peers);

  TransportContext ctx_;
  uint64_t hostHash_ = 0;
  ucp_context_h context_ = nullptr;
  Shared sh_;
  bool rdma_ = false;
  int efd_ = -1;  // the worker's event fd (owned by UCX)
  uint64_t activity_ = 0;  // events ucp_worker_progress reported (activity())
  bool addressed_ = false, connected_ = false, down_ = false;
  bool abandoned_ = false;  // stopped(): close without flushing
  std::vector<std::unique_ptr<UcxPeer>> peers_;  // by rank
};

Status UcxTransport::init() {
  ucp_config_t* cfg = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &cfg);
  if (st != UCS_OK)
    return Status(WEFT_ERR_SYSTEM, strFormat("ucx transport: ucp_config_read: %s", ucs_status_string(st)));
  // UCX 1.13 can deadlock in ucp_init when installing its memory hooks (a
  // write lock in ucm_event_handler_add, seen in forked ranks under load).
  // Those hooks serve UCP's registration and memory-type caches, which host
  // memory over tcp and shared memory does not need: off there, unless the
  // user set them. With RDMA the registration cache pays, and stays.
  rdma_ = ucxHasRdma();
  for (const char* v : {"RCACHE_ENABLE", "MEMTYPE_CACHE"}) {
    if (rdma_) break;
    std::string env = std::string("UCX_") + v;
    if (!getenv(env.c_str()) && ucp_config_modify(cfg, v, "n") != UCS_OK)
      WEFT_INFO(kTransport, "ucx transport: this UCX has no %s option", env.c_str());
  }
  // UCX's tcp transport moves a rendezvous in fragments of its receive
  // segment (64 KiB by default): 1 MiB ones take a 16 MiB allreduce on two
  // ranks from 12.2 to 7.7 ms. UCP hands keys it does not know itself to the
  // transports' own tables, without their prefix ("TCP_" here); only tcp
  // has this key (set where UCX_TLS leaves tcp out, UCP warns of it).
  if (tlsMayUse({"tcp"}) && !getenv("UCX_TCP_RX_SEG_SIZE") &&
      ucp_config_modify(cfg, "RX_SEG_SIZE", "1M") != UCS_OK)
    WEFT_INFO(kTransport, "ucx transport: this UCX takes no RX_SEG_SIZE for its tcp transport");
  // Without RDMA, rendezvous buys no zero copy: over tcp it adds a round
  // trip and moves the data as active messages. UCP starts it at about 20
  // KB over tcp (8 KB over shared memory); below 384 KiB (chunks up to 256
  // KiB) weft's messages now go eager. Larger ones keep rendezvous: an
  // eager message that arrives before its receive is posted is copied
  // twice, and 512 KiB-1 MiB eager messages were slower in some runs. Two
  // ranks over tcp: allreduce of 64 KiB 47 -> 31 us, 256 KiB 101 -> 71,
  // 512 KiB 218 -> 140; over UCX_TLS=sm 64 KiB 19 -> 14 us.
  if (!rdma_ && !getenv("UCX_RNDV_THRESH") &&
      ucp_config_modify(cfg, "RNDV_THRESH", "384K") != UCS_OK)
    WEFT_INFO(kTransport, "ucx transport: this UCX takes no RNDV_THRESH");
  // The topology's nearest RDMA NIC for this rank, unless the user chose
  // devices (port 1: each port of a ConnectX is a device of its own).
  if (rdma_ && !ctx_.rdmaNic.empty() && !getenv("UCX_NET_DEVICES")) {
    const std::string dev = ctx_.rdmaNic + ":1";
    if (ucp_config_modify(cfg, "NET_DEVICES", dev.c_str()) == UCS_OK)
      WEFT_INFO(kTransport, "ucx transport: rank %d uses %s (nearest NIC in the topology)", ctx_.rank,
                dev.c_str());
  }
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  // Wakeup: an idle engine sleeps on the worker's event fd (sleep()).
  p.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  p.mt_workers_shared = 0;
  st = ucp_init(&p, cfg, &context_);
  ucp_config_release(cfg);
  if (st != UCS_OK)
    return Status(WEFT_ERR_SYSTEM, strFormat("ucx transport: ucp_init: %s", ucs_status_string(st)));
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // The communicator's mutex serializes every call into the worker.
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(context_, &wp, &sh_.worker);
  if (st != UCS_OK)
    return Status(WEFT_ERR_SYSTEM,
                  strFormat("ucx transport: ucp_worker_create: %s", ucs_status_string(st)));
  if (ucp_worker_get_efd(sh_.worker, &efd_) != UCS_OK) efd_ = -1;
  return Status::ok();
}

// Arms the worker's event fd and waits on it; UCS_ERR_BUSY from arming means
// events are already waiting, so the caller progresses at once.
// Arming calls into the worker, so it runs under the comm's lock (UCP's
// serialized mode: one thread in the worker at a time); the wait is on the
// worker's event fd alone, which UCX keeps open until the worker goes.
Transport::Arm UcxTransport::armSleep(uint64_t*) {
  if (efd_ < 0 || down_) return Arm::kNoDoorbell;
  ucs_status_t st = ucp_worker_arm(sh_.worker);
  if (st == UCS_ERR_BUSY) return Arm::kNews;
  if (st != UCS_OK) return Arm::kNoDoorbell;
  return Arm::kArmed;
}

void UcxTransport::sleepArmed(uint64_t, int maxUs) {
  pollfd p{efd_, POLLIN, 0};
  const long ns = std::max(1, maxUs) * 1000L;
  timespec ts{ns / 1000000000L, ns % 1000000000L};
  ppoll(&p, 1, &ts, nullptr);
}

Status UcxTransport::localAddress(std::string* blob) {
  if (addressed_) return invalidUsage("ucx transport: localAddress() called twice");
  addressed_ = true;
  WEFT_RETURN_IF_ERROR(init());
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  ucs_status_t st = ucp_worker_get_address(sh_.worker, &addr, &len);
  if (st != UCS_OK)
    return Status(WEFT_ERR_SYSTEM,
                  strFormat("ucx transport: ucp_worker_get_address: %s", ucs_status_string(st)));
  BlobHeader h{kBlobMagic, kWireVersion, hostHash_, static_cast<int32_t>(getpid()),
               static_cast<uint32_t>(len)};
  BlobWriter(blob).put(h).bytes(addr, len);
  ucp_worker_release_address(sh_.worker, addr);
  WEFT_INFO(kTransport, "ucx transport: rank %d worker address of %zu bytes%s", ctx_.rank, len,
            rdma_ ? " (RDMA-capable transports present)" : "");
  return Status::ok();
}

Status UcxTransport::connect(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                             std::vector<std::unique_ptr<Endpoint>>* eps) {
  if (!addressed_ || connected_ || !sh_.worker)
    return invalidUsage("ucx transport: connect() needs one localAddress() first, once");
  connected_ = true;
  peers_.resize(ctx_.nranks);
  for (int p : peers) {
    if (p < 0 || p >= ctx_.nranks || p == ctx_.rank)
      return invalidArgument(strFormat("ucx transport: rank %d cannot connect to rank %d", ctx_.rank, p));
    BlobHeader h;
    const char* addr = nullptr;
    WEFT_RETURN_IF_ERROR(decodeBlob(blobs, p, &h, &addr));
    std::string host = static_cast<size_t>(p) < ctx_.peers.size() ? ctx_.peers[p].hostname : "?";
    if (host.empty()) host = "?";
    peers_[p] = std::make_unique<UcxPeer>(&sh_, p, host, h.pid, h.hostHash == hostHash_);
    // The worker address: UCP reads it byte by byte (no alignment needed).
    WEFT_RETURN_IF_ERROR(peers_[p]->open(addr, !rdma_ && ctx_.config.ucxFastRndv));
  }
  WEFT_RETURN_IF_ERROR(hello(peers));
  if (eps->size() < static_cast<size_t>(ctx_.nranks)) eps->resize(ctx_.nranks);
  for (int p : peers) (*eps)[p] = std::make_unique<UcxEndpoint>(peers_[p].get());
  WEFT_INFO(kTransport, "ucx transport: rank %d connected to %zu peers", ctx_.rank, peers.size());
  return Status::ok();
}

// Every rank sends a Hello to every peer on both endpoints (message 0 on the
// control one, 1 on the bulk one) and waits for theirs, driving the worker:
// UCP wires endpoints up lazily, through both sides' progress, and this
// pays for that before the first collective.
Status UcxTransport::hello(const std::vector<int>& peers) {
  struct Pending {
    int peer;
    int e;  // 0: control endpoint, 1: bulk endpoint
    void* send;
    void* recv;
    Hello in;
    Hello out;
  };
  std::vector<Pending> ps(2 * peers.size());
  ucp_request_param_t none{};
  Status result;
  for (size_t i = 0; i < ps.size(); ++i) {
    Pending& q = ps[i];
    q.peer = peers[i / 2];
    q.e = static_cast<int>(i % 2);
    UcxPeer* peer = peers_[q.peer].get();
    q.out = makeHello(ctx_.key, ctx_.commId, ctx_.rank, q.peer, q.e);
    q.recv = ucp_tag_recv_nbx(sh_.worker, &q.in, sizeof q.in, ucpTag(q.peer, Kind::Hello, q.e),
                              ~0ull, &none);
    q.send = ucp_tag_send_nbx(q.e ? peer->bulkEp() : peer->ep(), &q.out, sizeof q.out,
                              ucpTag(ctx_.rank, Kind::Hello, q.e), &none);
    for (void* r : {q.recv, q.send})
      if (UCS_PTR_IS_ERR(r) && result.isOk())
        result = Status(WEFT_ERR_REMOTE, strFormat("ucx transport: hello with rank %d: %s", q.peer,
                                                   ucs_status_string(UCS_PTR_STATUS(r))));
  }
  auto pendingOf = [](void* r) {
    return UCS_PTR_IS_PTR(r) && ucp_request_check_status(r) == UCS_INPROGRESS;
  };
  Deadline dl(ctx_.config.bootstrapTimeoutS);
  while (result.isOk()) {
    ucp_worker_progress(sh_.worker);
    bool waiting = false;
    for (Pending& q : ps) waiting |= pendingOf(q.send) || pendingOf(q.recv);
    if (!waiting) break;
    if (sh_.sticky.isError()) result = sh_.sticky;
    if (dl.expired()) {
      std::string missing;
      // A peer's two hellos (control, bulk) are adjacent in ps.
      for (size_t i = 0; i < ps.size(); i += 2) {
        bool late = false;
        for (size_t k = i; k < i + 2; ++k) late |= pendingOf(ps[k].send) || pendingOf(ps[k].recv);
        if (late) missing += strFormat(" %d", ps[i].peer);
      }
      result = Status(WEFT_ERR_TIMEOUT,
                      strFormat("ucx transport: rank %d: connect timed out after %.0f s "
                                "(WEFT_BOOTSTRAP_TIMEOUT_S); still missing:%s",
                                ctx_.rank, ctx_.config.bootstrapTimeoutS, missing.c_str()));
    }
    if (result.isOk()) usleep(50);
  }
  for (Pending& q : ps) {
    for (void** r : {&q.recv, &q.send}) {
      if (!UCS_PTR_IS_PTR(*r)) continue;
      ucs_status_t st = ucp_request_check_status(*r);
      if (st == UCS_INPROGRESS) {
        ucp_request_cancel(sh_.worker, *r);
        st = UCS_ERR_CANCELED;
      }
      if (st != UCS_OK && result.isOk())
        result = Status(WEFT_ERR_REMOTE, strFormat("ucx transport: hello with %s: %s",
                                                   peers_[q.peer]->describe().c_str(),
                                                   ucs_status_string(st)));
      ucp_request_free(*r);
    }
    if (result.isOk()) result = checkHello(q.in, ctx_.key, ctx_.commId, q.peer, ctx_.rank, q.e);
  }
  return result;
}

void UcxTransport::shutdown() {
  if (down_) return;
  down_ = true;
  if (!sh_.worker) return;
  // A send completes once UCX holds the data, not once the peer has it: an
  // endpoint is flushed before it closes, so that a rank leaving right after
  // its last send does not take that message with it. Endpoints with work
  // pending (abort) or to a lost peer close at once.
  //
  // A receive UCX already matched cannot be cancelled: progressing the
  // worker could still write its data, into a buffer the engine may have
  // freed by now (abort fails the ops first). With any such receive the
  // endpoints close at once and the worker is not progressed again.
  bool receiving = false;
  for (auto& p : peers_) receiving |= p && p->receiving();
  std::vector<void*> closing;
  bool flushing = false;
  for (auto& p : peers_) {
    if (!p) continue;
    const bool flush = !receiving && !abandoned_ && p->quiet();
    flushing |= flush;
    p->drop(flush, &closing);
  }
  if (receiving) {
    for (void* r : closing) ucp_request_free(r);  // released when UCX is done with it
    if (sh_.sticky.isOk()) sh_.sticky = Status();
    return;
  }
  // Bounded: a flush to a peer that stopped progressing gives up.
  Deadline dl(flushing ? 5 : 1);
  while (!dl.expired()) {
    ucp_worker_progress(sh_.worker);
    bool busy = false;
    for (void* r : closing) busy |= ucp_request_check_status(r) == UCS_INPROGRESS;
    if (!busy) break;
    usleep(20);
  }
  for (void* r : closing) {
    if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(sh_.worker, r);
    ucp_request_free(r);
  }
  if (sh_.sticky.isOk()) sh_.sticky = Status();
}

}  // namespace
}  // namespace ucx

std::unique_ptr<Transport> makeUcxTransport(const TransportContext& ctx) {
  return std::make_unique<ucx::UcxTransport>(ctx);
}

}  // namespace weft
