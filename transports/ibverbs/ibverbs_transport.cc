// The ibverbs transport: InfiniBand / RoCE through rdma-core, RC queue pairs
// (WEFT_IB_QPS_PER_PEER per peer) on the port ibverbs_device.h picks,
// eager SENDs for small messages and RDMA WRITE with immediate for large
// ones (ibverbs_wire.h), credit flow control (credits.h), a registration cache
// (reg_cache.h) and one completion queue polled by progress().
//
// Used only when WEFT_TRANSPORTS names it: it has not yet run on RDMA
// hardware (the machines that built it have none), so it is not chosen by
// default; tests/transport runs the conformance suite over it wherever
// ibv_get_device_list finds a device.
#include <unistd.h>

#include <cstring>
#include <memory>

#include "core/clock.h"
#include "core/log.h"
#include "transports/base/blob.h"
#include "transports/ibverbs/ibverbs_peer.h"
#include "transports/transport.h"

namespace weft {
namespace ib {
namespace {

using IbEndpoint = ForwardingEndpoint<IbPeer*>;

class IbTransport : public Transport {
 public:
  explicit IbTransport(const TransportContext& ctx) : ctx_(ctx) {
    hostHash_ = static_cast<size_t>(ctx.rank) < ctx.peers.size() ? ctx.peers[ctx.rank].hostHash : 0;
    sh_.rank = ctx.rank;
  }
  ~IbTransport() override {
    shutdown();
    peers_.clear();  // QPs before the CQ and PD
    if (cache_) cache_->clear();
    cache_.reset();
    if (devCache_) devCache_->clear();
    devCache_.reset();
    if (sh_.cq) ibv_destroy_cq(sh_.cq);
    if (sh_.pd) ibv_dealloc_pd(sh_.pd);
    closeIbPort(&sh_.port);
  }

  const char* name() const override { return "ibverbs"; }
  bool canReach(const PeerInfo& peer) const override { return peer.rank != ctx_.rank; }
  TransportCaps caps() const override {
    TransportCaps c;
    c.scope = LinkScope::InterHost;
    c.preferredChunk = 1 << 20;
    c.bandwidthGBs = 10.0;  // until the topology measures the link
    c.latencyUs = 3.0;
    c.cudaMemory = sh_.gdr != GdrMode::Off;
    c.cpuBound = false;  // the NIC moves the bytes
    return c;
  }
  Status setUpGdr();
  Status localAddress(std::string* blob) override;
  Status connect(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                 std::vector<std::unique_ptr<Endpoint>>* eps) override;
  Status progress() override;
  uint64_t activity() const override { return activity_; }
  Status checkPeer(int peer) override {
    if (peer < 0 || static_cast<size_t>(peer) >= peers_.size() || !peers_[peer]) return Status::ok();
    return peers_[peer]->check();
  }
  void shutdown() override {
    if (down_) return;
    down_ = true;
    for (auto& p : peers_)
      if (p) p->drop();
  }

 private:
  void poll();

  TransportContext ctx_;
  uint64_t hostHash_ = 0;
  Shared sh_;
  uint64_t activity_ = 0;
  std::unique_ptr<RegCache> cache_, devCache_;
  std::vector<std::unique_ptr<IbPeer>> peers_;
  int nqps_ = 1;
  bool addressed_ = false, connected_ = false, down_ = false;
};

// GPUDirect RDMA (gdr.h) as WEFT_NET_GDR says: device buffers then get a
// registration cache of their own, registered exactly (no rounding to host
// pages, which could reach outside the allocation).
Status IbTransport::setUpGdr() {
  int want = -1;
  WEFT_RETURN_IF_ERROR(parseGdrSetting(ctx_.config.netGdr, &want));
  if (want == 0) {
    sh_.gdrWhy = "WEFT_NET_GDR=0";
    return Status::ok();
  }
  sh_.gdr = probeGdr(&sh_.gdrWhy);
  if (sh_.gdr == GdrMode::Off) {
    if (want == 1)
      return Status(WEFT_ERR_SYSTEM, "ibverbs: WEFT_NET_GDR=1 but GPUDirect RDMA is unavailable: " +
                                         sh_.gdrWhy);
    WEFT_INFO(kTransport, "ibverbs: rank %d: GPUDirect RDMA off (%s)", ctx_.rank, sh_.gdrWhy.c_str());
    return Status::ok();
  }
  ibv_pd* pd = sh_.pd;
  const GdrMode mode = sh_.gdr;
  devCache_ = std::make_unique<RegCache>(
      256, 1,
      [pd, mode](uintptr_t start, size_t len, Registration* r) {
        ibv_mr* mr = nullptr;
        WEFT_RETURN_IF_ERROR(registerDeviceMr(
            pd, mode, start, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &mr));
        r->handle = mr;
        r->lkey = mr->lkey;
        r->rkey = mr->rkey;
        return Status::ok();
      },
      [](const Registration& r) { ibv_dereg_mr(static_cast<ibv_mr*>(r.handle)); });
  sh_.devCache = devCache_.get();
  WEFT_INFO(kTransport, "ibverbs: rank %d: GPUDirect RDMA on (%s)", ctx_.rank, gdrModeName(mode));
  return Status::ok();
}

Status IbTransport::localAddress(std::string* blob) {
  if (addressed_) return invalidUsage("ibverbs transport: localAddress() called twice");
  addressed_ = true;
  nqps_ = std::max(1, std::min(16, ctx_.config.ibQpsPerPeer));
  // Without WEFT_IB_HCA, the device the topology puts this rank on first
  // (its nearest NIC); any usable one when that fails.
  Status opened(WEFT_ERR_SYSTEM, "");
  if (ctx_.config.ibHca.empty() && !ctx_.rdmaNic.empty()) {
    Config near = ctx_.config;
    near.ibHca = "=" + ctx_.rdmaNic;
    opened = openIbPort(near, &sh_.port);
    if (opened.isError())
      WEFT_INFO(kTransport, "ibverbs: rank %d: the topology's nearest NIC %s: %s; trying the others",
                ctx_.rank, ctx_.rdmaNic.c_str(), opened.message().c_str());
  }
  if (opened.isError()) WEFT_RETURN_IF_ERROR(openIbPort(ctx_.config, &sh_.port));
  sh_.pd = ibv_alloc_pd(sh_.port.ctx);
  if (!sh_.pd) return systemError("ibverbs: ibv_alloc_pd", errno);
  const int cqe = std::max(64, (ctx_.nranks - 1) * nqps_ * static_cast<int>(3 * kSlots));
  sh_.cq = ibv_create_cq(sh_.port.ctx, cqe, nullptr, nullptr, 0);
  if (!sh_.cq) return systemError(strFormat("ibverbs: ibv_create_cq(%d)", cqe), errno);
  ibv_pd* pd = sh_.pd;
  cache_ = std::make_unique<RegCache>(
      1024, static_cast<size_t>(sysconf(_SC_PAGESIZE)),
      [pd](uintptr_t start, size_t len, Registration* r) {
        ibv_mr* mr = ibv_reg_mr(pd, reinterpret_cast<void*>(start), len,
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (!mr) return systemError(strFormat("ibverbs: ibv_reg_mr of %zu bytes", len), errno);
        r->handle = mr;
        r->lkey = mr->lkey;
        r->rkey = mr->rkey;
        return Status::ok();
      },
      [](const Registration& r) { ibv_dereg_mr(static_cast<ibv_mr*>(r.handle)); });
  sh_.cache = cache_.get();
  WEFT_RETURN_IF_ERROR(setUpGdr());
  // QPs for every other rank: the blob must carry the numbers each peer
  // connects to before anyone knows who will use this transport.
  peers_.resize(ctx_.nranks);
  std::vector<QpAddr> all(static_cast<size_t>(ctx_.nranks) * nqps_, QpAddr{0, 0});
  for (int r = 0; r < ctx_.nranks; ++r) {
    if (r == ctx_.rank) continue;
    const PeerInfo* pi = static_cast<size_t>(r) < ctx_.peers.size() ? &ctx_.peers[r] : nullptr;
    peers_[r] = std::make_unique<IbPeer>(&sh_, r, nqps_, pi ? pi->hostname : "?", pi ? pi->pid : 0,
                                         pi && pi->hostHash == hostHash_);
    WEFT_RETURN_IF_ERROR(peers_[r]->create());
    std::vector<QpAddr> a = peers_[r]->addrs();
    for (int k = 0; k < nqps_; ++k) all[static_cast<size_t>(r) * nqps_ + k] = a[k];
  }
  BlobHeader h{};
  h.magic = kBlobMagic;
  h.version = kWireVersion;
  h.hostHash = hostHash_;
  h.pid = static_cast<int32_t>(getpid());
  h.nranks = ctx_.nranks;
  h.nqps = nqps_;
  h.mtu = sh_.port.mtu;
  h.lid = sh_.port.lid;
  h.useGid = sh_.port.ethernet || sh_.port.lid == 0;
  memcpy(h.gid, sh_.port.gid.raw, 16);
  BlobWriter(blob).put(h).putArray(all);
  return Status::ok();
}

Status IbTransport::connect(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                            std::vector<std::unique_ptr<Endpoint>>* eps) {
  if (!addressed_ || connected_ || !sh_.cq)
    return invalidUsage("ibverbs transport: connect() needs one localAddress() first, once");
  connected_ = true;
  for (int p : peers) {
    BlobHeader h;
    std::vector<QpAddr> qps;  // the QPs rank p made for this rank
    WEFT_RETURN_IF_ERROR(decodeBlob(blobs, p, ctx_.rank, ctx_.nranks, nqps_, &h, &qps));
    WEFT_RETURN_IF_ERROR(peers_[p]->connect(h, qps.data(), ctx_.key, ctx_.commId));
  }
  // Every peer's Hello, bounded by the bootstrap timeout.
  Deadline dl(ctx_.config.bootstrapTimeoutS);
  for (;;) {
    poll();
    if (sh_.sticky.isError()) return sh_.sticky;
    std::string missing;
    for (int p : peers)
      if (!peers_[p]->helloReceived()) missing += strFormat("%d ", p);
    if (missing.empty()) break;
    if (dl.expired())
      return Status(WEFT_ERR_TIMEOUT, strFormat("ibverbs transport: rank %d: connect timed out "
                                                "after %.0f s; still missing: %s",
                                                ctx_.rank, ctx_.config.bootstrapTimeoutS,
                                                missing.c_str()));
    usleep(100);
  }
  if (eps->size() < static_cast<size_t>(ctx_.nranks)) eps->resize(ctx_.nranks);
  for (int p : peers) (*eps)[p] = std::make_unique<IbEndpoint>(peers_[p].get());
  WEFT_INFO(kTransport, "ibverbs transport: rank %d connected to %zu peers on %s:%d, %d QPs each",
            ctx_.rank, peers.size(), sh_.port.device.c_str(), sh_.port.port, nqps_);
  return Status::ok();
}

void IbTransport::poll() {
  ibv_wc wc[32];
  for (int round = 0; round < 4; ++round) {
    int n = ibv_poll_cq(sh_.cq, 32, wc);
    if (n < 0) {
      if (sh_.sticky.isOk()) sh_.sticky = Status(WEFT_ERR_SYSTEM, "ibverbs: ibv_poll_cq failed");
      return;
    }
    activity_ += static_cast<uint64_t>(n);  // work completions (activity())
    for (int i = 0; i < n; ++i) {
      int p = wrPeer(wc[i].wr_id);
      if (p >= 0 && p < ctx_.nranks && peers_[p]) peers_[p]->onCompletion(wc[i]);
    }
    if (n < 32) return;
  }
}

Status IbTransport::progress() {
  if (!sh_.cq || down_) return Status::ok();
  poll();
  return sh_.sticky;
}

}  // namespace
}  // namespace ib

std::unique_ptr<Transport> makeIbverbsTransport(const TransportContext& ctx) {
  return std::make_unique<ib::IbTransport>(ctx);
}

int ibverbsDeviceCount() { return ib::ibDeviceCount(); }

}  // namespace weft
