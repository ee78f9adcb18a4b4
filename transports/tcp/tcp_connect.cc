#include "transports/tcp/tcp_connect.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/clock.h"
#include "core/log.h"
#include "transports/tcp/tcp_wire.h"

namespace weft {
namespace tcp {
namespace {

struct Conn {
  enum State { kConnecting, kSending, kReceiving };
  int fd = -1;
  bool outgoing = false;
  State state = kConnecting;
  int peer = -1;  // known at once when outgoing, from the hello when incoming
  int sock = -1;
  Hello out{};
  size_t outOff = 0;
  Hello in{};
  size_t inOff = 0;
  uint64_t startNs = 0;
  net::Address remote;
};

struct Retry {
  int peer;
  int sock;
  uint64_t atNs;
};

class Establisher {
 public:
  Establisher(const TransportContext& ctx, int listenFd, const std::vector<int>& peers,
              const std::vector<net::Address>& addrs, std::vector<std::vector<int>>* fds)
      : ctx_(ctx),
        listenFd_(listenFd),
        peers_(peers),
        addrs_(addrs),
        fds_(fds),
        nsocks_(std::max(1, ctx.config.nsocksPerPeer)) {}

  ~Establisher() {
    for (Conn& c : conns_) net::closeFd(&c.fd);
  }

  Status run();

 private:
  Hello makeHello(int to, int sock) const {
    return tcp::makeHello(ctx_.key, ctx_.commId, ctx_.rank, to, sock, nsocks_);
  }
  void startConnect(int peer, int sock);
  void acceptAll();
  void handle(Conn& c, short revents);
  void refuse(Conn& c, const std::string& why);
  void retryLater(Conn& c, const std::string& why);
  std::string checkHello(const Conn& c) const;
  bool done() const;
  std::string missing() const;

  const TransportContext& ctx_;
  int listenFd_;
  const std::vector<int>& peers_;
  const std::vector<net::Address>& addrs_;
  std::vector<std::vector<int>>* fds_;
  int nsocks_;
  std::vector<Conn> conns_;
  std::vector<Retry> retries_;
  std::vector<int> attempts_;  // failed attempts per (peer, socket)
};

void Establisher::startConnect(int peer, int sock) {
  Conn c;
  c.outgoing = true;
  c.peer = peer;
  c.sock = sock;
  c.remote = addrs_[peer];
  c.out = makeHello(peer, sock);
  c.startNs = nowNs();
  c.fd = socket(c.remote.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) {
    retries_.push_back({peer, sock, nowNs() + 100000000ull});
    return;
  }
  net::setBufferSizes(c.fd, static_cast<int>(ctx_.config.socketBufBytes));
  net::setNoDelay(c.fd);
  if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&c.remote.ss), c.remote.len) == 0) {
    c.state = Conn::kSending;
  } else if (errno == EINPROGRESS || errno == EINTR) {
    c.state = Conn::kConnecting;
  } else {
    int err = errno;
    conns_.push_back(c);
    retryLater(conns_.back(), strerror(err));
    return;
  }
  conns_.push_back(c);
}

void Establisher::acceptAll() {
  for (;;) {
    Conn c;
    c.remote.len = sizeof c.remote.ss;
    c.fd = accept4(listenFd_, reinterpret_cast<sockaddr*>(&c.remote.ss), &c.remote.len,
                   SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c.fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        WEFT_WARN(kTransport, "tcp transport: rank %d: accept: %s", ctx_.rank, strerror(errno));
      return;
    }
    net::setNoDelay(c.fd);
    net::setBufferSizes(c.fd, static_cast<int>(ctx_.config.socketBufBytes));
    c.state = Conn::kReceiving;
    c.startNs = nowNs();
    conns_.push_back(c);
  }
}

void Establisher::refuse(Conn& c, const std::string& why) {
  WEFT_WARN(kTransport, "tcp transport: rank %d refused the connection from %s: %s", ctx_.rank,
            c.remote.toString().c_str(), why.c_str());
  net::closeFd(&c.fd);
}

void Establisher::retryLater(Conn& c, const std::string& why) {
  WEFT_TRACE(kTransport,
             "tcp transport: rank %d: connection %d to rank %d (%s) failed (%s); "
             "retrying",
             ctx_.rank, c.sock, c.peer, c.remote.toString().c_str(), why.c_str());
  net::closeFd(&c.fd);
  // 10 ms, doubling up to 1 s: a peer that keeps refusing is not flooded.
  int& n = attempts_[static_cast<size_t>(c.peer) * nsocks_ + c.sock];
  uint64_t delayMs = std::min<uint64_t>(1000, 10ull << std::min(n++, 7));
  retries_.push_back({c.peer, c.sock, nowNs() + delayMs * 1000000ull});
}

// Why the hello in c.in is not acceptable, or "" when it is.
std::string Establisher::checkHello(const Conn& c) const {
  const HelloCheck want{ctx_.key, ctx_.commId, ctx_.rank, nsocks_, c.outgoing, c.peer, c.sock};
  return tcp::checkHello(c.in, want, peers_, *fds_);
}

void Establisher::handle(Conn& c, short revents) {
  if (c.state == Conn::kConnecting) {
    if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return retryLater(c, strerror(err));
    c.state = Conn::kSending;
  }
  if (c.state == Conn::kSending) {
    while (c.outOff < sizeof c.out) {
      ssize_t n = send(c.fd, reinterpret_cast<char*>(&c.out) + c.outOff, sizeof c.out - c.outOff,
                       MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (c.outgoing) return retryLater(c, strerror(errno));
        return refuse(c, strFormat("send: %s", strerror(errno)));
      }
      c.outOff += static_cast<size_t>(n);
    }
    if (!c.outgoing) {  // accepted and answered: done
      (*fds_)[c.peer][c.sock] = c.fd;
      c.fd = -1;
      return;
    }
    c.state = Conn::kReceiving;
  }
  if (c.state == Conn::kReceiving) {
    while (c.inOff < sizeof c.in) {
      ssize_t n = recv(c.fd, reinterpret_cast<char*>(&c.in) + c.inOff, sizeof c.in - c.inOff, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (c.outgoing) return retryLater(c, strerror(errno));
        return refuse(c, strFormat("recv: %s", strerror(errno)));
      }
      if (n == 0) {
        if (c.outgoing) return retryLater(c, "closed by the peer before its answer");
        return refuse(c, strFormat("closed after %zu bytes, before a complete hello", c.inOff));
      }
      c.inOff += static_cast<size_t>(n);
    }
    if (c.inOff >= sizeof(uint32_t) && c.in.magic != kHelloMagic) {
      if (c.outgoing) return retryLater(c, "answer with bad magic");
      return refuse(c, strFormat("garbage (magic 0x%08x)", c.in.magic));
    }
    if (c.inOff < sizeof c.in) return;
    std::string why = checkHello(c);
    if (!why.empty()) {
      if (!c.outgoing) return refuse(c, why);
      WEFT_WARN(kTransport, "tcp transport: rank %d: bad answer from %s: %s", ctx_.rank,
                c.remote.toString().c_str(), why.c_str());
      return retryLater(c, why);
    }
    if (c.outgoing) {
      (*fds_)[c.peer][c.sock] = c.fd;
      c.fd = -1;
      return;
    }
    c.peer = c.in.rank;
    c.sock = c.in.sockIndex;
    c.out = makeHello(c.peer, c.sock);
    c.state = Conn::kSending;
    handle(c, POLLOUT);
  }
}

bool Establisher::done() const {
  for (int p : peers_)
    for (int s = 0; s < nsocks_; ++s)
      if ((*fds_)[p][s] < 0) return false;
  return true;
}

std::string Establisher::missing() const {
  std::string out;
  for (int p : peers_) {
    int have = 0;
    for (int s = 0; s < nsocks_; ++s) have += (*fds_)[p][s] >= 0;
    if (have == nsocks_) continue;
    if (!out.empty()) out += ", ";
    if (p > ctx_.rank)
      out += strFormat("%d (%s: %d of %d sockets answered)", p, addrs_[p].toString().c_str(), have,
                       nsocks_);
    else
      out += strFormat("%d (%d of %d sockets arrived from it)", p, have, nsocks_);
  }
  return out;
}

Status Establisher::run() {
  Deadline dl(ctx_.config.bootstrapTimeoutS);
  fds_->assign(ctx_.nranks, std::vector<int>(nsocks_, -1));
  attempts_.assign(static_cast<size_t>(ctx_.nranks) * nsocks_, 0);
  bool expectIncoming = false;
  for (int p : peers_) {
    if (p > ctx_.rank)
      for (int s = 0; s < nsocks_; ++s) startConnect(p, s);
    else
      expectIncoming = true;
  }
  std::vector<pollfd> pfds;
  while (!done()) {
    if (dl.expired())
      return Status(WEFT_ERR_TIMEOUT,
                    strFormat("tcp transport: rank %d timed out after %.1f s connecting; ranks "
                              "still missing: %s",
                              ctx_.rank, ctx_.config.bootstrapTimeoutS, missing().c_str()));
    uint64_t now = nowNs();
    int waitMs = std::min(dl.remainingMs(), 50);
    for (size_t i = 0; i < retries_.size();) {
      if (retries_[i].atNs <= now) {
        Retry r = retries_[i];
        retries_.erase(retries_.begin() + static_cast<long>(i));
        startConnect(r.peer, r.sock);
      } else {
        ++i;
      }
    }
    pfds.clear();
    pfds.push_back({expectIncoming ? listenFd_ : -1, POLLIN, 0});
    for (Conn& c : conns_)
      pfds.push_back({c.fd, static_cast<short>(c.state == Conn::kReceiving ? POLLIN : POLLOUT), 0});
    int rc = poll(pfds.data(), pfds.size(), retries_.empty() ? waitMs : std::min(waitMs, 10));
    if (rc < 0 && errno != EINTR) return systemError("tcp transport: poll", errno);
    // Conns appended meanwhile (accepts) are handled in the next round.
    size_t n = conns_.size();
    for (size_t i = 0; i < n && rc > 0; ++i)
      if (pfds[i + 1].revents) handle(conns_[i], pfds[i + 1].revents);
    if (rc > 0 && (pfds[0].revents & POLLIN)) acceptAll();
    now = nowNs();
    for (Conn& c : conns_)
      if (c.fd >= 0 && !c.outgoing && now - c.startNs > static_cast<uint64_t>(kHelloTimeoutS * 1e9))
        refuse(c, strFormat("no hello within %.0f s", kHelloTimeoutS));
    conns_.erase(
        std::remove_if(conns_.begin(), conns_.end(), [](const Conn& c) { return c.fd < 0; }),
        conns_.end());
  }
  return Status::ok();
}

}  // namespace

Hello makeHello(const Key& key, uint64_t commId, int rank, int to, int sock, int nsocks) {
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kWireVersion;
  h.commId = commId;
  h.rank = rank;
  h.to = to;
  h.sockIndex = sock;
  h.nsocks = nsocks;
  const Mac m = helloMac(key, h);
  memcpy(h.mac, m.data(), kMacBytes);
  return h;
}

std::string checkHello(const Hello& h, const HelloCheck& want, const std::vector<int>& peers,
                       const std::vector<std::vector<int>>& fds) {
  if (h.magic != kHelloMagic) return strFormat("garbage (magic 0x%08x)", h.magic);
  if (h.version != kWireVersion)
    return strFormat("wire version %u, not %u", h.version, kWireVersion);
  if (h.commId != want.commId)
    return "hello for another communicator (of this job, or of one with another secret)";
  if (h.to != want.rank) return strFormat("hello meant for rank %d, not %d", h.to, want.rank);
  if (!macEqual(h.mac, helloMac(want.key, h).data()))
    return "authentication failed (its HMAC is not this communicator's: another job's secret, "
           "or a forgery)";
  if (h.nsocks != want.nsocks)
    return strFormat("it uses %d sockets per peer, this rank %d (WEFT_NSOCKS_PER_PEER differs)",
                     h.nsocks, want.nsocks);
  if (h.sockIndex < 0 || h.sockIndex >= want.nsocks)
    return strFormat("bad socket index %d", h.sockIndex);
  if (want.outgoing) {
    if (h.rank != want.peer)
      return strFormat("answered as rank %d, expected rank %d", h.rank, want.peer);
    if (h.sockIndex != want.sock)
      return strFormat("answered for socket %d, not %d", h.sockIndex, want.sock);
    return "";
  }
  if (h.rank < 0 || h.rank >= want.rank || static_cast<size_t>(h.rank) >= fds.size() ||
      std::find(peers.begin(), peers.end(), h.rank) == peers.end())
    return strFormat("rank %d is not a rank that connects to rank %d", h.rank, want.rank);
  const std::vector<int>& have = fds[h.rank];
  if (static_cast<size_t>(h.sockIndex) >= have.size())
    return strFormat("bad socket index %d", h.sockIndex);
  if (have[h.sockIndex] >= 0)
    return strFormat("duplicate socket %d from rank %d", h.sockIndex, h.rank);
  return "";
}

Status establish(const TransportContext& ctx, int listenFd, const std::vector<int>& peers,
                 const std::vector<net::Address>& addrs, std::vector<std::vector<int>>* fds) {
  Establisher e(ctx, listenFd, peers, addrs, fds);
  Status st = e.run();
  if (!st.isOk()) {
    WEFT_WARN(kTransport, "%s", st.message().c_str());
    for (auto& v : *fds)
      for (int& fd : v) net::closeFd(&fd);
  }
  return st;
}

}  // namespace tcp
}  // namespace weft
