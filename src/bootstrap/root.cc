// The rendezvous root: a detached thread that serves exactly one rendezvous.
//
// It polls the listening socket and every connection at once, so a port
// scanner that connects and stays silent, or a client that sends garbage,
// never holds up the ranks. Each connection gets a challenge (a fresh
// nonce) at once and has kHelloTimeoutS to send a complete RootHello whose
// HMAC answers it under the job key; anything wrong closes it with a warning
// that names the remote address and why. Once all nranks ranks are in, every
// rank gets the session nonce and the table of all ranks' ring addresses,
// with an HMAC answering its own nonce, and the thread exits. At the bootstrap
// timeout the connected ranks get an error frame naming the missing ranks.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/checks.h"
#include "bootstrap/wire.h"
#include "core/clock.h"
#include "core/log.h"

namespace weft {
namespace boot {

std::string rankList(const int* ranks, size_t n) {
  std::string out = n == 1 ? "rank " : "ranks ";
  size_t i = 0, shown = 0;
  while (i < n) {
    size_t j = i;
    while (j + 1 < n && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out += ",";
    if (j - i >= 2) {
      out += strFormat("%d-%d", ranks[i], ranks[j]);
    } else {
      out += std::to_string(ranks[i]);
      if (j > i) out += "," + std::to_string(ranks[j]);
    }
    i = j + 1;
    if (++shown == 32 && i < n) {
      out += strFormat(",... (%zu in all)", n);
      break;
    }
  }
  return out;
}

namespace {

struct Conn {
  int fd = -1;
  net::Address peer;
  Nonce nonce{};  // the challenge sent to it
  uint64_t helloDeadlineNs = 0;
  RootHello hello{};
  size_t got = 0;  // bytes of `hello` received
  int rank = -1;   // >= 0 once registered
  std::string out;
  size_t sent = 0;
};

class Root {
 public:
  Root(int listenFd, const net::Address& addr, uint64_t secret, double timeoutS)
      : listenFd_(listenFd),
        addr_(addr),
        where_(addr.toString()),
        key_(jobKey(secret)),
        timeoutS_(timeoutS),
        dl_(timeoutS) {
    // The session nonce: with the job key, it makes the keys of this
    // rendezvous's communicator (Bootstrap::commKey). Fresh per rendezvous.
    if (!randomNonce(&session_).isOk()) throw std::runtime_error("getrandom failed");
  }
  ~Root() {
    for (auto& c : conns_) net::closeFd(&c->fd);
    net::closeFd(&listenFd_);
  }

  void run();

 private:
  void acceptAll();
  void readHello(Conn* c);
  void readRegistered(Conn* c);
  std::string validate(const Conn& c) const;
  bool authentic(const Conn& c) const;
  // `frame` (header and payload) and its MAC for connection c.
  std::string sealed(const Conn& c, std::string frame) const;
  void drop(Conn* c) { net::closeFd(&c->fd); }
  void refuse(Conn* c, const std::string& why, int code, bool tell);
  void finish();

  int listenFd_;
  net::Address addr_;
  std::string where_;
  Key key_;
  Nonce session_{};
  double timeoutS_;
  Deadline dl_;
  uint64_t startNs_ = nowNs();
  uint64_t acceptPausedUntilNs_ = 0;
  int nranks_ = 0;  // learnt from the first valid hello
  int registered_ = 0;
  std::unordered_map<int, Conn*> byRank_;  // the ranks in: grows as they join
  std::vector<std::unique_ptr<Conn>> conns_;
  // Authentic hellos refused (the first few): a timeout then says why the
  // ranks it misses are missing, not only that they are.
  static constexpr size_t kRefusalsKept = 8;
  std::vector<std::string> refused_;
};

bool Root::authentic(const Conn& c) const {
  return rootHelloAuthentic(c.hello, key_, c.nonce.data());
}

std::string Root::sealed(const Conn& c, std::string frame) const {
  const Mac m = rootReplyMac(key_, c.hello.nonce, c.nonce.data(), frame.data(), frame.size());
  frame.append(reinterpret_cast<const char*>(m.data()), m.size());
  return frame;
}

std::string Root::validate(const Conn& c) const {
  return checkRootHello(c.hello, key_, c.nonce.data(), nranks_,
                        [this](int r) { return byRank_.count(r) != 0; });
}

// Closes `c` with a warning. `tell`: the hello was complete, so the rank gets
// an error frame explaining the refusal (under the root's MAC, which a rank
// with another secret cannot check, and says so).
void Root::refuse(Conn* c, const std::string& why, int code, bool tell) {
  WEFT_WARN(kBootstrap, "bootstrap root at %s: refused connection from %s: %s", where_.c_str(),
            c->peer.toString().c_str(), why.c_str());
  if (tell) {
    std::string msg = "bootstrap: the root at " + where_ + " refused this rank: " + why;
    RootReply r{kRootReplyMagic, code, 0, static_cast<uint32_t>(msg.size())};
    std::string frame(reinterpret_cast<const char*>(&r), sizeof r);
    frame = sealed(*c, frame + msg);
    // Best effort: a small frame on a fresh socket fits the send buffer.
    ssize_t n = send(c->fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
  }
  drop(c);
}

void Root::acceptAll() {
  for (;;) {
    net::Address a;
    a.len = sizeof a.ss;
    int fd = accept4(listenFd_, reinterpret_cast<sockaddr*>(&a.ss), &a.len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      WEFT_WARN(kBootstrap, "bootstrap root at %s: accept failed: %s", where_.c_str(),
                strerror(err));
      // Out of descriptors (or similar): make room by dropping the oldest
      // connection still owing its hello, and pause accepting briefly.
      for (auto& c : conns_) {
        if (c->fd >= 0 && c->rank < 0) {
          WEFT_WARN(kBootstrap, "bootstrap root at %s: dropping %s to free a descriptor",
                    where_.c_str(), c->peer.toString().c_str());
          drop(c.get());
          break;
        }
      }
      acceptPausedUntilNs_ = nowNs() + 100 * 1000000ull;
      return;
    }
    size_t pending = 0;
    for (auto& c : conns_)
      if (c->fd >= 0 && c->rank < 0) ++pending;
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->peer = a;
    c->helloDeadlineNs = nowNs() + static_cast<uint64_t>(kHelloTimeoutS * 1e9);
    if (pending >= kMaxPendingConns) {
      refuse(c.get(), strFormat("too many connections (%zu) owe their hello", pending), 0,
             false);
      continue;
    }
    // The challenge: 24 bytes on a fresh socket always fit its buffer.
    RootChallenge ch{kRootChallengeMagic, kWireVersion, {}};
    if (!randomNonce(&c->nonce).isOk()) {
      refuse(c.get(), "getrandom failed", 0, false);
      continue;
    }
    memcpy(ch.nonce, c->nonce.data(), kNonceBytes);
    if (send(fd, &ch, sizeof ch, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof ch)) {
      refuse(c.get(), std::string("cannot send the challenge: ") + strerror(errno), 0, false);
      continue;
    }
    WEFT_TRACE(kBootstrap, "bootstrap root at %s: connection from %s", where_.c_str(),
               a.toString().c_str());
    conns_.push_back(std::move(c));
  }
}

void Root::readHello(Conn* c) {
  for (;;) {
    auto* buf = reinterpret_cast<char*>(&c->hello);
    ssize_t n = recv(c->fd, buf + c->got, sizeof c->hello - c->got, 0);
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      refuse(c, std::string("receive failed before a complete hello: ") + strerror(err), 0,
             false);
      return;
    }
    if (n == 0) {
      refuse(c,
             strFormat("closed after %zu of %zu hello bytes", c->got, sizeof(RootHello)),
             0, false);
      return;
    }
    c->got += static_cast<size_t>(n);
    // Refuse garbage as soon as its first word shows it.
    if (c->got >= sizeof(uint32_t) && c->hello.magic != kRootHelloMagic) {
      refuse(c, "bad magic", 0, false);
      return;
    }
    if (c->got < sizeof c->hello) continue;

    const RootHello& h = c->hello;
    std::string why = validate(*c);
    if (!why.empty()) {
      // Only authentic refusals are worth a line in the timeout message;
      // every complete hello gets an answer, so that a rank with a wrong
      // secret learns why.
      if (authentic(*c) && refused_.size() < kRefusalsKept)
        refused_.push_back(strFormat("a process at %s claiming rank %d of %d was refused: %s",
                                     c->peer.toString().c_str(), h.rank, h.nranks, why.c_str()));
      refuse(c, why, WEFT_ERR_INVALID_USAGE, h.magic == kRootHelloMagic);
      return;
    }
    if (nranks_ == 0) nranks_ = h.nranks;
    c->rank = h.rank;
    byRank_[h.rank] = c;
    ++registered_;
    WEFT_INFO(kBootstrap, "bootstrap root at %s: rank %d of %d joined from %s (%d/%d)",
              where_.c_str(), h.rank, nranks_, c->peer.toString().c_str(), registered_, nranks_);
    return;
  }
}

// A registered rank has nothing more to say; data is drained and ignored,
// EOF means it left (it may rejoin before the timeout).
void Root::readRegistered(Conn* c) {
  char scratch[256];
  for (;;) {
    ssize_t n = recv(c->fd, scratch, sizeof scratch, 0);
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    WEFT_WARN(kBootstrap,
              "bootstrap root at %s: rank %d (%s) disconnected before all %d ranks joined",
              where_.c_str(), c->rank, c->peer.toString().c_str(), nranks_);
    byRank_.erase(c->rank);
    --registered_;
    c->rank = -1;
    drop(c);
    return;
  }
}

void Root::run() {
  WEFT_INFO(kBootstrap, "bootstrap root listening at %s (timeout %g s)", where_.c_str(),
            timeoutS_);
  std::vector<pollfd> pfds;
  std::vector<Conn*> polled;
  while (!(nranks_ > 0 && registered_ == nranks_) && !dl_.expired()) {
    uint64_t now = nowNs();
    uint64_t wakeNs = UINT64_MAX;
    for (auto& c : conns_) {
      if (c->fd < 0 || c->rank >= 0) continue;
      if (c->helloDeadlineNs <= now) {
        refuse(c.get(),
               strFormat("timed out: no complete hello within %g s (%zu of %zu bytes)",
                         kHelloTimeoutS, c->got, sizeof(RootHello)),
               0, false);
      } else {
        wakeNs = std::min(wakeNs, c->helloDeadlineNs);
      }
    }
    conns_.erase(std::remove_if(conns_.begin(), conns_.end(),
                                [](const std::unique_ptr<Conn>& c) { return c->fd < 0; }),
                 conns_.end());

    pfds.clear();
    polled.clear();
    bool acceptOn = now >= acceptPausedUntilNs_;
    if (!acceptOn) wakeNs = std::min(wakeNs, acceptPausedUntilNs_);
    pfds.push_back(pollfd{acceptOn ? listenFd_ : -1, POLLIN, 0});
    for (auto& c : conns_) {
      pfds.push_back(pollfd{c->fd, POLLIN, 0});
      polled.push_back(c.get());
    }
    int timeoutMs = dl_.remainingMs();
    if (wakeNs != UINT64_MAX) {
      uint64_t ms = wakeNs > now ? (wakeNs - now) / 1000000 + 1 : 0;
      timeoutMs = std::min<int>(timeoutMs, static_cast<int>(std::min<uint64_t>(ms, 1u << 30)));
    }
    int rc = poll(pfds.data(), pfds.size(), timeoutMs);
    if (rc < 0) {
      if (errno == EINTR) continue;
      WEFT_WARN(kBootstrap, "bootstrap root at %s: poll failed: %s", where_.c_str(),
                strerror(errno));
      break;
    }
    if (rc == 0) continue;
    if (pfds[0].revents) acceptAll();
    for (size_t i = 0; i < polled.size(); ++i) {
      Conn* c = polled[i];
      if (!pfds[i + 1].revents || c->fd < 0) continue;
      if (c->rank < 0)
        readHello(c);
      else
        readRegistered(c);
    }
  }
  finish();
}

void Root::finish() {
  net::closeFd(&listenFd_);  // no more joiners: late ranks get "refused"
  bool complete = nranks_ > 0 && registered_ == nranks_;
  std::string frame;
  if (complete) {
    RootReply r{kRootReplyMagic, 0, static_cast<uint32_t>(nranks_),
                static_cast<uint32_t>(kNonceBytes + nranks_ * net::Address::kPackedSize)};
    frame.assign(reinterpret_cast<const char*>(&r), sizeof r);
    frame.append(reinterpret_cast<const char*>(session_.data()), session_.size());
    for (int i = 0; i < nranks_; ++i)
      frame.append(reinterpret_cast<const char*>(byRank_.at(i)->hello.addr),
                   net::Address::kPackedSize);
  } else if (nranks_ > 0) {
    std::vector<int> missing;
    for (int i = 0; i < nranks_; ++i)
      if (!byRank_.count(i)) missing.push_back(i);
    std::string msg = strFormat("bootstrap: %s of %d did not join within %g s",
                                rankList(missing.data(), missing.size()).c_str(), nranks_,
                                timeoutS_);
    for (const std::string& r : refused_) msg += "; " + r;
    WEFT_WARN(kBootstrap, "bootstrap root at %s: %s", where_.c_str(), msg.c_str());
    RootReply r{kRootReplyMagic, WEFT_ERR_TIMEOUT, static_cast<uint32_t>(nranks_),
                static_cast<uint32_t>(msg.size())};
    frame.assign(reinterpret_cast<const char*>(&r), sizeof r);
    frame += msg;
  } else {
    WEFT_WARN(kBootstrap, "bootstrap root at %s: no rank joined within %g s", where_.c_str(),
              timeoutS_);
  }

  // Connections that never became ranks are closed; ranks get the frame.
  size_t idle = 0;
  for (auto& c : conns_) {
    if (c->fd < 0) continue;
    if (c->rank < 0) {
      ++idle;
      drop(c.get());
    } else {
      c->out = sealed(*c, frame);
    }
  }
  if (idle)
    WEFT_INFO(kBootstrap, "bootstrap root at %s: closed %zu connections that sent no hello",
              where_.c_str(), idle);

  // Flush the frames, all connections at once.
  Deadline flushDl(complete ? std::max(2.0, std::min(timeoutS_, 30.0)) : 2.0);
  std::vector<pollfd> pfds;
  std::vector<Conn*> polled;
  for (;;) {
    pfds.clear();
    polled.clear();
    for (auto& c : conns_) {
      if (c->fd < 0) continue;
      while (c->sent < c->out.size()) {
        ssize_t n = send(c->fd, c->out.data() + c->sent, c->out.size() - c->sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
          c->sent += static_cast<size_t>(n);
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
          break;
        } else {
          WEFT_WARN(kBootstrap, "bootstrap root at %s: cannot send to rank %d (%s): %s",
                    where_.c_str(), c->rank, c->peer.toString().c_str(),
                    n < 0 ? strerror(errno) : "closed");
          drop(c.get());
          break;
        }
      }
      if (c->fd >= 0 && c->sent == c->out.size()) drop(c.get());
      if (c->fd >= 0) {
        pfds.push_back(pollfd{c->fd, POLLOUT, 0});
        polled.push_back(c.get());
      }
    }
    if (pfds.empty()) break;
    if (flushDl.expired()) {
      for (Conn* c : polled) {
        WEFT_WARN(kBootstrap, "bootstrap root at %s: rank %d (%s) did not take its reply",
                  where_.c_str(), c->rank, c->peer.toString().c_str());
        drop(c);
      }
      break;
    }
    int rc = poll(pfds.data(), pfds.size(), flushDl.remainingMs());
    if (rc < 0 && errno != EINTR) break;
  }
  if (complete)
    WEFT_INFO(kBootstrap, "bootstrap root at %s: rendezvous of %d ranks done in %.3f s",
              where_.c_str(), nranks_, static_cast<double>(nowNs() - startNs_) * 1e-9);
}

}  // namespace

Status startRoot(int listenFd, const net::Address& addr, uint64_t secret, double timeoutS) {
  std::shared_ptr<Root> root;
  try {
    root = std::make_shared<Root>(listenFd, addr, secret, timeoutS);
  } catch (const std::exception& e) {
    int fd = listenFd;
    net::closeFd(&fd);
    WEFT_WARN(kBootstrap, "cannot start the bootstrap root: %s", e.what());
    return Status(WEFT_ERR_SYSTEM, std::string("cannot start the bootstrap root: ") + e.what());
  }
  try {
    // The thread owns the root (and its sockets); nothing joins it. If the
    // process exits first, the thread simply vanishes with it.
    std::thread([root] {
      try {
        root->run();
      } catch (const std::exception& e) {
        WEFT_WARN(kBootstrap, "bootstrap root stopped: %s", e.what());
      }
    }).detach();
  } catch (const std::exception& e) {
    // `root` closes the listening socket when it goes.
    WEFT_WARN(kBootstrap, "cannot start the bootstrap root thread: %s", e.what());
    return Status(WEFT_ERR_SYSTEM, std::string("cannot start the bootstrap root thread: ") +
                                       e.what());
  }
  return Status::ok();
}

}  // namespace boot
}  // namespace weft
