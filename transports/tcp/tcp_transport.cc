// The tcp transport: any two ranks, over nsocks TCP streams per pair
// (tcp_connect.h sets them up, tcp_peer.h moves the data). One epoll set
// holds every stream; progress() asks it which streams are ready and serves
// only those, and pollFd() hands it to an engine that wants to sleep.
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "core/log.h"
#include "net/socket.h"
#include "transports/base/blob.h"
#include "transports/tcp/tcp_connect.h"
#include "transports/tcp/tcp_peer.h"
#include "transports/tcp/tcp_wire.h"
#include "transports/transport.h"

namespace weft {
namespace tcp {
namespace {

using TcpEndpoint = ForwardingEndpoint<std::shared_ptr<TcpPeer>>;

class TcpTransport : public Transport {
 public:
  explicit TcpTransport(const TransportContext& ctx) : ctx_(ctx) {
    ctx_.config.nsocksPerPeer = std::min(16, std::max(1, ctx_.config.nsocksPerPeer));
  }
  ~TcpTransport() override { shutdown(); }

  const char* name() const override { return "tcp"; }
  bool canReach(const PeerInfo& peer) const override { return peer.rank != ctx_.rank; }
  TransportCaps caps() const override {
    TransportCaps c;
    c.scope = LinkScope::InterHost;
    c.preferredChunk = static_cast<size_t>(ctx_.config.nsocksPerPeer) * (512 << 10);
    c.bandwidthGBs = 1.0;
    c.latencyUs = 20.0;
    return c;
  }
  int pollFd() const override { return epfd_; }

  Status localAddress(std::string* blob) override;
  Status connect(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                 std::vector<std::unique_ptr<Endpoint>>* eps) override;
  Status progress() override;
  uint64_t activity() const override { return activity_; }
  Status checkPeer(int peer) override {
    if (peer < 0 || static_cast<size_t>(peer) >= peers_.size() || !peers_[peer])
      return Status::ok();
    return peers_[peer]->check();
  }
  void stopped(StopCause) override {
    for (auto& p : peers_)
      if (p) p->hangUp();
  }
  void shutdown() override {
    for (auto& p : peers_)
      if (p) p->abort();
    net::closeFd(&listenFd_);
    net::closeFd(&epfd_);
  }

 private:
  TransportContext ctx_;
  int listenFd_ = -1;
  int epfd_ = -1;
  bool addressed_ = false;
  bool connected_ = false;
  std::vector<std::shared_ptr<TcpPeer>> peers_;  // by rank
  std::vector<int> hungUp_;                      // ranks with streams out of the epoll set
  Status sticky_;                                // the first error progress() saw
  int64_t pending_ = 0;                          // unfinished operations, all peers
  uint64_t activity_ = 0;                        // reads and writes that moved bytes (activity())
};

Status TcpTransport::localAddress(std::string* blob) {
  if (addressed_) return invalidUsage("tcp transport: localAddress() called twice");
  addressed_ = true;
  net::Address addr, bound;
  std::string ifname;
  WEFT_RETURN_IF_ERROR(net::pickLocalAddress(ctx_.config.socketIfname, &addr, &ifname));
  int backlog = std::max(128, ctx_.nranks * ctx_.config.nsocksPerPeer + 64);
  WEFT_RETURN_IF_ERROR(net::listenOn(addr, backlog, &listenFd_, &bound));
  net::setBufferSizes(listenFd_, static_cast<int>(ctx_.config.socketBufBytes));  // inherited by accepted sockets
  Blob b{};
  b.magic = kBlobMagic;
  b.version = kWireVersion;
  bound.pack(b.addr);
  BlobWriter(blob).put(b);
  WEFT_INFO(kTransport, "tcp transport: rank %d listens on %s (%s)", ctx_.rank,
            bound.toString().c_str(), ifname.c_str());
  return Status::ok();
}

Status TcpTransport::connect(const std::vector<int>& peers, const std::vector<std::string>& blobs,
                             std::vector<std::unique_ptr<Endpoint>>* eps) {
  if (!addressed_ || connected_ || listenFd_ < 0)
    return invalidUsage("tcp transport: connect() needs one localAddress() first, once");
  connected_ = true;
  std::vector<net::Address> addrs(ctx_.nranks);
  for (int p : peers) {
    if (p < 0 || p >= ctx_.nranks || p == ctx_.rank)
      return invalidArgument(
          strFormat("tcp transport: rank %d cannot connect to rank %d", ctx_.rank, p));
    WEFT_RETURN_IF_ERROR(decodeBlob(blobs, p, &addrs[p]));
  }
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) return systemError("tcp transport: epoll_create1", errno);
  std::vector<std::vector<int>> fds;
  Status st = establish(ctx_, listenFd_, peers, addrs, &fds);
  net::closeFd(&listenFd_);  // whoever connects later is refused by the kernel
  if (!st.isOk()) return st;
  peers_.resize(ctx_.nranks);
  if (eps->size() < static_cast<size_t>(ctx_.nranks)) eps->resize(ctx_.nranks);
  for (int p : peers) {
    peers_[p] = std::make_shared<TcpPeer>(ctx_.rank, p, addrs[p], fds[p], epfd_, &pending_,
                                          &activity_);
    WEFT_RETURN_IF_ERROR(peers_[p]->failed());
    peers_[p]->setFaults(ctx_.faults);
    (*eps)[p] = std::make_unique<TcpEndpoint>(peers_[p]);
  }
  WEFT_INFO(kTransport, "tcp transport: rank %d connected to %zu peers, %d sockets each", ctx_.rank,
            peers.size(), ctx_.config.nsocksPerPeer);
  return Status::ok();
}

Status TcpTransport::progress() {
  if (epfd_ < 0) return Status::ok();
  if (pending_ == 0 && hungUp_.empty()) return sticky_;  // idle: no system call
  Status first;
  epoll_event evs[64];
  int n = epoll_wait(epfd_, evs, 64, 0);
  if (n < 0 && errno != EINTR) return systemError("tcp transport: epoll_wait", errno);
  for (int i = 0; i < n; ++i) {
    int rank = static_cast<int>(evs[i].data.u64 >> 32);
    int sock = static_cast<int>(evs[i].data.u64 & 0xffffffffu);
    TcpPeer* p = peers_[rank].get();
    Status st = p->onEvent(sock, evs[i].events);
    if (st.isError() && first.isOk()) first = st;
    if (p->needsPolling() && std::find(hungUp_.begin(), hungUp_.end(), rank) == hungUp_.end())
      hungUp_.push_back(rank);
  }
  for (int rank : hungUp_) {
    Status st = peers_[rank]->pollHungUp();
    if (st.isError() && first.isOk()) first = st;
  }
  // A lost peer keeps failing progress() until the engine gives up.
  if (first.isError() && sticky_.isOk()) sticky_ = first;
  return sticky_;
}
}  // namespace
}  // namespace tcp

std::unique_ptr<Transport> makeTcpTransport(const TransportContext& ctx) {
  return std::make_unique<tcp::TcpTransport>(ctx);
}

}  // namespace weft
