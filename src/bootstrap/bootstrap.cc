// Bootstrap::create: the rendezvous with the root, then the ring.
//
//   1. connect to the root (retrying until the bootstrap timeout: under
//      weft_comm_init_env the root may not listen yet);
//   2. listen for the ring on this rank's address (WEFT_SOCKET_IFNAME, or
//      else the local address of the connection to the root, which is
//      reachable from the root's network; for a wildcard root address, the
//      first usable interface);
//   3. read the root's challenge, send the RootHello (its HMAC answers the
//      challenge), receive the rank table and the session nonce (or an
//      error frame), checking the root's HMAC;
//   4. connect to rank+1 and send a RingHello (its HMAC bound to the
//      session); accept rank-1 on the listening socket, refusing (with a
//      log line) any connection whose hello is garbage, fails
//      authentication or names the wrong rank.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/checks.h"
#include "bootstrap/wire.h"
#include "core/clock.h"
#include "core/log.h"
#include "net/socket.h"

namespace weft {

namespace {

using boot::kHelloTimeoutS;
using boot::RingHello;
using boot::RootHello;
using boot::RootReply;

struct FdGuard {
  int fd = -1;
  ~FdGuard() { net::closeFd(&fd); }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

// Extra time a rank waits for the root's reply beyond the bootstrap timeout,
// so that the root's own timeout (which names the missing ranks) arrives
// first.
double replyGraceS(double timeoutS) { return std::min(10.0, 1.0 + 0.05 * timeoutS); }

bool isWildcard(const net::Address& a) {
  if (a.ss.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&a.ss)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (a.ss.ss_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&a.ss)->sin6_addr);
  return false;
}

Status failure(weft_result_t code, const std::string& msg) {
  WEFT_WARN(kBootstrap, "%s", msg.c_str());
  return Status(code, msg);
}

// The root's challenge, read as soon as the connection is up.
Status receiveChallenge(int fd, const std::string& rootName, const std::string& me,
                        const Deadline& dl, Nonce* rootNonce) {
  boot::RootChallenge c{};
  Status st = net::recvAll(fd, &c, sizeof c, dl);
  if (!st.isOk())
    return failure(st.code() == WEFT_ERR_TIMEOUT ? WEFT_ERR_TIMEOUT : WEFT_ERR_REMOTE,
                   me + ": no challenge from the bootstrap root at " + rootName + ": " +
                       st.message());
  if (c.magic != boot::kRootChallengeMagic || c.version != boot::kWireVersion)
    return failure(WEFT_ERR_REMOTE,
                   strFormat("%s: the root at %s sent magic 0x%08x version %u, not a weft root "
                             "of wire version %u (another weft version, or not weft)",
                             me.c_str(), rootName.c_str(), c.magic, c.version,
                             boot::kWireVersion));
  memcpy(rootNonce->data(), c.nonce, kNonceBytes);
  return Status::ok();
}

// The root's answer to our hello: the session nonce and the table of ring
// addresses, or its error; its MAC proves it came from a root that holds the
// job secret.
Status receiveTable(int fd, const std::string& rootName, int rank, int nranks, double timeoutS,
                    const Deadline& dl, const Key& key, const uint8_t* myNonce,
                    const uint8_t* rootNonce, Nonce* session, std::vector<net::Address>* table) {
  const std::string me = strFormat("bootstrap: rank %d of %d", rank, nranks);
  // The header and payload as sent, for the MAC.
  auto authentic = [&](const RootReply& r, const std::string& payload, Status* err) {
    std::string frame(reinterpret_cast<const char*>(&r), sizeof r);
    frame += payload;
    uint8_t mac[kMacBytes];
    Status s = net::recvAll(fd, mac, sizeof mac, dl);
    if (!s.isOk()) {
      *err = s;
      return false;
    }
    return macEqual(
        mac, boot::rootReplyMac(key, myNonce, rootNonce, frame.data(), frame.size()).data());
  };
  RootReply r{};
  Status st = net::recvAll(fd, &r, sizeof r, dl);
  if (st.code() == WEFT_ERR_TIMEOUT)
    return failure(WEFT_ERR_TIMEOUT,
                   strFormat("%s: no rank table from the root at %s within %g s (other ranks "
                             "did not join, or the root is stuck)",
                             me.c_str(), rootName.c_str(), timeoutS));
  if (st.code() == WEFT_ERR_REMOTE)
    return failure(WEFT_ERR_REMOTE,
                   me + ": the root at " + rootName +
                       " closed the connection before sending the rank table (it refused this "
                       "rank's hello, e.g. a wrong secret, or its process exited; see its log)");
  if (!st.isOk()) return failure(st.code(), me + ": receiving the rank table: " + st.message());
  if (r.magic != boot::kRootReplyMagic)
    return failure(WEFT_ERR_REMOTE, strFormat("%s: the root at %s sent a bad reply (magic "
                                              "0x%08x); is it a weft root?",
                                              me.c_str(), rootName.c_str(), r.magic));
  if (r.code != WEFT_SUCCESS) {
    if (r.payloadBytes > boot::kMaxErrorPayload)
      return failure(WEFT_ERR_REMOTE, me + ": oversized error frame from the root at " + rootName);
    std::string msg(r.payloadBytes, '\0');
    Status s2 = net::recvAll(fd, msg.data(), msg.size(), dl);
    if (!s2.isOk()) {
      msg = "(the root's error message was lost: " + s2.message() + ")";
    } else if (!authentic(r, msg, &s2)) {
      // Its answer to a wrong secret, most likely: the root then cannot
      // answer under this rank's key either.
      msg += s2.isOk() ? " (this reply could not be authenticated: the root's job secret "
                         "differs from this rank's)"
                       : " (the reply's MAC was lost: " + s2.message() + ")";
    }
    weft_result_t code = static_cast<weft_result_t>(r.code);
    if (r.code <= 0 || r.code >= WEFT_IN_PROGRESS) code = WEFT_ERR_REMOTE;  // not an error code
    return failure(code, msg);
  }
  if (r.nranks != static_cast<uint32_t>(nranks) ||
      r.payloadBytes != kNonceBytes + static_cast<uint64_t>(nranks) * net::Address::kPackedSize)
    return failure(WEFT_ERR_INTERNAL,
                   strFormat("%s: the root at %s sent a table of %u ranks (%u bytes)",
                             me.c_str(), rootName.c_str(), r.nranks, r.payloadBytes));
  std::string payload(r.payloadBytes, '\0');
  st = net::recvAll(fd, payload.data(), payload.size(), dl);
  if (!st.isOk()) return failure(st.code(), me + ": receiving the rank table: " + st.message());
  if (!authentic(r, payload, &st))
    return failure(WEFT_ERR_REMOTE,
                   st.isOk() ? me + ": the rank table from " + rootName +
                                   " failed authentication: whatever answered there does not "
                                   "hold this job's secret"
                             : me + ": receiving the rank table's MAC: " + st.message());
  const std::string bad = boot::parseRankTable(payload, nranks, session, table);
  if (!bad.empty())
    return failure(WEFT_ERR_INTERNAL, me + ": the root at " + rootName + " sent " + bad);
  return Status::ok();
}

struct PendingPeer {
  int fd = -1;
  net::Address peer;
  uint64_t deadlineNs = 0;
  RingHello hello{};
  size_t got = 0;
};

// Accepts the connection of rank `prev` on `listenFd`. Other connections
// (scanners, garbage, wrong secret or rank) are closed with a warning while
// the wait goes on.
Status acceptRingPeer(int listenFd, const Key& key, const Nonce& session, int rank, int nranks,
                      double timeoutS, const Deadline& dl, int* out) {
  const int prev = (rank - 1 + nranks) % nranks;
  std::vector<PendingPeer> pend;
  auto refuse = [&](PendingPeer& p, const std::string& why) {
    WEFT_WARN(kBootstrap, "bootstrap: rank %d refused a ring connection from %s: %s", rank,
              p.peer.toString().c_str(), why.c_str());
    net::closeFd(&p.fd);
  };
  auto closeAll = [&] {
    for (auto& p : pend) net::closeFd(&p.fd);
  };
  std::vector<pollfd> pfds;
  for (;;) {
    uint64_t now = nowNs();
    uint64_t wakeNs = UINT64_MAX;
    for (auto& p : pend) {
      if (p.fd < 0) continue;
      if (p.deadlineNs <= now)
        refuse(p, strFormat("timed out: no complete hello within %g s", kHelloTimeoutS));
      else
        wakeNs = std::min(wakeNs, p.deadlineNs);
    }
    pend.erase(std::remove_if(pend.begin(), pend.end(),
                              [](const PendingPeer& p) { return p.fd < 0; }),
               pend.end());
    if (dl.expired()) {
      closeAll();
      return failure(WEFT_ERR_TIMEOUT,
                     strFormat("bootstrap: rank %d of %d: rank %d did not connect within %g s",
                               rank, nranks, prev, timeoutS));
    }
    pfds.clear();
    pfds.push_back(pollfd{listenFd, POLLIN, 0});
    for (auto& p : pend) pfds.push_back(pollfd{p.fd, POLLIN, 0});
    int timeoutMs = dl.remainingMs();
    if (wakeNs != UINT64_MAX)
      timeoutMs = std::min<int>(
          timeoutMs, static_cast<int>(std::min<uint64_t>((wakeNs - now) / 1000000 + 1, 1u << 30)));
    int rc = poll(pfds.data(), pfds.size(), timeoutMs);
    if (rc < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      closeAll();
      WEFT_WARN(kBootstrap, "bootstrap: rank %d: poll failed: %s", rank, strerror(err));
      return systemError(strFormat("bootstrap: rank %d: poll", rank), err);
    }
    if (rc == 0) continue;
    // Hellos first (pfds[1..] match pend before any new accept).
    for (size_t i = 0; i + 1 < pfds.size(); ++i) {
      PendingPeer& p = pend[i];
      if (!pfds[i + 1].revents || p.fd < 0) continue;
      auto* buf = reinterpret_cast<char*>(&p.hello);
      ssize_t n = recv(p.fd, buf + p.got, sizeof p.hello - p.got, MSG_DONTWAIT);
      if (n < 0) {
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
          refuse(p, std::string("receive failed before a complete hello: ") + strerror(errno));
        continue;
      }
      if (n == 0) {
        refuse(p, strFormat("closed after %zu of %zu hello bytes", p.got, sizeof(RingHello)));
        continue;
      }
      p.got += static_cast<size_t>(n);
      if (p.got >= sizeof(uint32_t) && p.hello.magic != boot::kRingHelloMagic) {
        refuse(p, "bad magic");
        continue;
      }
      if (p.got < sizeof p.hello) continue;
      const std::string why = boot::checkRingHello(p.hello, key, session, nranks, prev);
      if (!why.empty()) {
        refuse(p, why);
      } else {
        Status st = net::setNonBlocking(p.fd, false);
        if (!st.isOk()) {
          closeAll();
          return st;
        }
        net::setNoDelay(p.fd);
        *out = p.fd;
        p.fd = -1;
        closeAll();
        return Status::ok();
      }
    }
    if (pfds[0].revents) {
      for (;;) {
        PendingPeer p;
        p.peer.len = sizeof p.peer.ss;
        int fd = accept4(listenFd, reinterpret_cast<sockaddr*>(&p.peer.ss), &p.peer.len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          if (errno != EAGAIN && errno != EWOULDBLOCK)
            WEFT_WARN(kBootstrap, "bootstrap: rank %d: accept failed: %s", rank,
                      strerror(errno));
          break;
        }
        p.fd = fd;
        p.deadlineNs = nowNs() + static_cast<uint64_t>(kHelloTimeoutS * 1e9);
        if (pend.size() >= boot::kMaxPendingConns) {
          refuse(p, "too many connections owe their hello");
          continue;
        }
        pend.push_back(p);
      }
    }
  }
}

}  // namespace

Status Bootstrap::create(const weft_unique_id_t& id, int rank, int nranks, const Config& cfg,
                         std::unique_ptr<Bootstrap>* out) {
  if (!out) return invalidArgument("Bootstrap::create: out is NULL");
  UniqueIdData d;
  WEFT_RETURN_IF_ERROR(decodeUniqueId(id, &d));
  if (nranks < 1) return failure(WEFT_ERR_INVALID_ARGUMENT,
                                 strFormat("bootstrap: nranks %d is less than 1", nranks));
  if (rank < 0 || rank >= nranks)
    return failure(WEFT_ERR_INVALID_ARGUMENT,
                   strFormat("bootstrap: rank %d is outside [0, %d)", rank, nranks));
  net::Address root;
  net::Address::unpack(d.rootAddr, &root);  // checked by decodeUniqueId
  const std::string rootName = root.toString();
  const double T = cfg.bootstrapTimeoutS;
  const std::string me = strFormat("bootstrap: rank %d of %d", rank, nranks);

  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  const Key key = jobKey(d.secret);

  // 1. The root.
  const uint64_t startNs = nowNs();
  Deadline dl(T);
  FdGuard rootFd;
  Status st = net::connectTo(root, dl, &rootFd.fd);
  if (st.code() == WEFT_ERR_TIMEOUT)
    return failure(WEFT_ERR_TIMEOUT, strFormat("%s: cannot reach the bootstrap root at %s "
                                               "within %g s (%s)",
                                               me.c_str(), rootName.c_str(), T,
                                               st.message().c_str()));
  if (!st.isOk())
    return failure(st.code(), me + ": cannot reach the bootstrap root at " + rootName + ": " +
                                  st.message());

  // 2. Our ring listening socket.
  net::Address local;
  std::string ifname = "(route to the root)";
  if (!cfg.socketIfname.empty() || isWildcard(root)) {
    // A wildcard root (e.g. "0.0.0.0:port" on rank 0 under init_env) is
    // reached through loopback from its own host; that says nothing about
    // the address other hosts can use.
    st = net::pickLocalAddress(cfg.socketIfname, &local, &ifname);
    if (!st.isOk()) return st.withContext(me);
  } else {
    local.len = sizeof local.ss;
    if (getsockname(rootFd.fd, reinterpret_cast<sockaddr*>(&local.ss), &local.len) != 0)
      return failure(WEFT_ERR_SYSTEM, me + ": getsockname: " + strerror(errno));
  }
  local.setPort(0);
  net::Address bound;
  st = net::listenOn(local, 256, &b->listenFd_, &bound);
  if (!st.isOk()) return st.withContext(me);

  // 3. Challenge, hello and rank table.
  Nonce rootNonce{}, myNonce{}, session{};
  WEFT_RETURN_IF_ERROR(receiveChallenge(rootFd.fd, rootName, me, dl, &rootNonce));
  WEFT_RETURN_IF_ERROR(randomNonce(&myNonce));
  RootHello hello{};
  hello.magic = boot::kRootHelloMagic;
  hello.version = boot::kWireVersion;
  memcpy(hello.nonce, myNonce.data(), kNonceBytes);
  hello.rank = rank;
  hello.nranks = nranks;
  bound.pack(hello.addr);
  const Mac hmac = boot::rootHelloMac(key, rootNonce.data(), hello);
  memcpy(hello.mac, hmac.data(), kMacBytes);
  st = net::sendAll(rootFd.fd, &hello, sizeof hello, dl);
  if (!st.isOk())
    return failure(st.code(), me + ": sending the hello to the root at " + rootName + ": " +
                                  st.message());
  std::vector<net::Address> table;
  double elapsedS = static_cast<double>(nowNs() - startNs) * 1e-9;
  Deadline replyDl(std::max(0.0, T + replyGraceS(T) - elapsedS));
  WEFT_RETURN_IF_ERROR(receiveTable(rootFd.fd, rootName, rank, nranks, T, replyDl, key,
                                    myNonce.data(), rootNonce.data(), &session, &table));
  b->commKey_ = deriveKey(key, "weft comm key", session.data(), session.size());
  b->commId_ = deriveTag(b->commKey_, "weft comm id");
  net::closeFd(&rootFd.fd);
  WEFT_INFO(kBootstrap, "%s: joined via root %s; ring address %s (%s)", me.c_str(),
            rootName.c_str(), bound.toString().c_str(), ifname.c_str());

  // 4. The ring: each wait bounded by the bootstrap timeout afresh.
  if (nranks > 1) {
    Deadline ringDl(T);
    const int next = (rank + 1) % nranks;
    const std::string nextName = table[static_cast<size_t>(next)].toString();
    st = net::connectTo(table[static_cast<size_t>(next)], ringDl, &b->nextFd_);
    if (!st.isOk())
      return failure(st.code(), strFormat("%s: cannot connect to rank %d at %s: %s", me.c_str(),
                                          next, nextName.c_str(), st.message().c_str()));
    RingHello rh{boot::kRingHelloMagic, boot::kWireVersion, rank, nranks, {}};
    const Mac rmac = boot::ringHelloMac(key, session, rank, nranks);
    memcpy(rh.mac, rmac.data(), kMacBytes);
    st = net::sendAll(b->nextFd_, &rh, sizeof rh, ringDl);
    if (!st.isOk())
      return failure(st.code(), strFormat("%s: sending the ring hello to rank %d at %s: %s",
                                          me.c_str(), next, nextName.c_str(),
                                          st.message().c_str()));
    WEFT_RETURN_IF_ERROR(
        acceptRingPeer(b->listenFd_, key, session, rank, nranks, T, ringDl, &b->prevFd_));
  }
  // The listening socket stays open: weft_comm_shrink's agreement reaches
  // this rank there (agree.h; it accepts only frames under the comm key).
  b->table_ = std::move(table);
  WEFT_INFO(kBootstrap, "%s: ring ready", me.c_str());
  *out = std::move(b);
  return Status::ok();
}

}  // namespace weft
