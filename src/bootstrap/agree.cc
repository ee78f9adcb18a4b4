#include "bootstrap/agree.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "bootstrap/agree_wire.h"
#include "bootstrap/bootstrap.h"
#include "core/clock.h"
#include "core/log.h"

namespace weft {
namespace agree {
namespace {

// One frame's write or read once the peer talks; a connect to a host.
constexpr double kIoS = 2.0;
constexpr double kConnectS = 5.0;
// How often a coordinator probes the ranks it has not heard from.
constexpr uint64_t kProbeEveryNs = 500000000ull;
// A member that was told Wait gives the coordinator this much beyond the
// shrink timeout (it may be waiting that long for a silent rank).
constexpr double kDecideGraceS = 5.0;

// The errors of a connect that say nothing listens there any more, or the
// host is gone: the rank is gone (a live process's socket accepts even
// while the process is stopped).
bool goneError(int e) {
  return e == ECONNREFUSED || e == ECONNRESET || e == EHOSTUNREACH || e == ENETUNREACH ||
         e == ENETDOWN || e == EHOSTDOWN || e == ETIMEDOUT;
}

class Agreement {
 public:
  explicit Agreement(const Params& p) : p_(p), gone_(p.gone), why_(p.nranks) {
    gone_.resize(static_cast<size_t>(p.nranks), 0);
    p_.gone.resize(static_cast<size_t>(p.nranks), 0);
    p_.early.clear();
    for (int r = 0; r < p.nranks; ++r)
      if (gone_[r]) why_[r] = "excluded by the caller";
    for (const Early& e : p.early) handle(e.fd, e.frame);  // read while the comm ran
  }
  ~Agreement() {
    for (Parked& k : parked_) net::closeFd(&k.fd);
  }

  Status run(Outcome* out) {
    for (int round = 0; round <= p_.nranks; ++round) {
      if (excludedBy_ >= 0) return excluded();
      int c = 0;
      while (gone_[c]) ++c;  // this rank is never gone, so c <= rank
      if (c == p_.rank) return coordinate(out);
      bool done = false;
      WEFT_RETURN_IF_ERROR(follow(c, out, &done));
      if (done) return Status::ok();
    }
    return Status(WEFT_ERR_INTERNAL, "shrink: no coordinator left (a weft bug)");
  }

 private:
  struct Parked {
    int fd;
    int rank;
  };

  Frame frame(Kind k) const {
    Frame f;
    f.kind = k;
    f.from = p_.rank;
    f.attempt = p_.attempt;
    return f;
  }
  std::string me() const { return strFormat("shrink: rank %d of %d", p_.rank, p_.nranks); }
  Status excluded() const {
    return Status(WEFT_ERR_REVOKED,
                  strFormat("%s: the other survivors left this rank out (rank %d told it so: it "
                            "did not take part within WEFT_SHRINK_TIMEOUT_S=%g s)",
                            me().c_str(), excludedBy_, p_.timeoutS));
  }
  void markGone(int r, const std::string& why) {
    if (gone_[r]) return;
    gone_[r] = 1;
    why_[r] = why;
    log_ += strFormat(" rank %d gone: %s;", r, why.c_str());
    WEFT_INFO(kBootstrap, "%s: rank %d counts as gone: %s", me().c_str(), r, why.c_str());
  }

  Link link() const { return {p_.key, p_.commId, p_.rank, p_.nranks}; }
  Status sendFrame(int fd, const Frame& f) { return agree::sendFrame(fd, link(), f); }
  Status readFrame(int fd, double s, Frame* f) { return agree::readFrame(fd, link(), s, f); }

  // Accepts what waits on the listening socket and handles each first frame.
  void acceptPending() {
    for (;;) {
      int fd = accept4(p_.listenFd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN: nothing more (the socket is non-blocking)
      if (!net::setNonBlocking(fd, false).isOk()) {
        close(fd);
        continue;
      }
      Frame f;
      Status st = readFrame(fd, 1.0, &f);
      if (!st.isOk()) {
        // A coordinator's probe (closed at once), or a stranger.
        if (st.message().find("refused") != std::string::npos)
          WEFT_INFO(kBootstrap, "%s: %s", me().c_str(), st.message().c_str());
        close(fd);
        continue;
      }
      handle(fd, f);
    }
  }

  // A connection's first frame: proposals are parked (the caller answers
  // them), an exclusion notice is remembered, the rest is closed.
  void handle(int fd, const Frame& f) {
    if (f.kind == Kind::Propose && f.attempt == p_.attempt && !gone_[f.from]) {
      parked_.push_back({fd, f.from});
      return;
    }
    if (f.kind == Kind::Propose && f.attempt < p_.attempt) {
      // A rank still in an earlier shrink of this parent: it was left out then.
      (void)sendFrame(fd, frame(Kind::Excluded));
    } else if (f.kind == Kind::Excluded && f.attempt == p_.attempt) {
      excludedBy_ = f.from;
    }
    close(fd);
  }

  // Proposes to `c` and waits for its decision; *done when it came.
  Status follow(int c, Outcome* out, bool* done) {
    std::unique_ptr<int, void (*)(int*)> guard(nullptr, [](int* f) { net::closeFd(f); });
    int fd = -1;
    const int e = net::tryConnect(p_.addrs[c], Deadline(std::min(kConnectS, p_.timeoutS)), &fd);
    if (e != 0) {
      markGone(c, strFormat("cannot be reached at %s (%s)", p_.addrs[c].toString().c_str(),
                            strerror(e)));
      return Status::ok();
    }
    guard.reset(&fd);
    Frame prop = frame(Kind::Propose);
    for (int r = 0; r < p_.nranks; ++r)
      if (gone_[r]) prop.ranks.push_back(r);
    if (!sendFrame(fd, prop).isOk()) {
      markGone(c, "closed the connection");
      return Status::ok();
    }
    auto dl = std::make_unique<Deadline>(p_.timeoutS);
    bool acked = false;
    for (;;) {
      if (dl->expired()) {
        markGone(c, acked ? strFormat("decided nothing within %g s", p_.timeoutS + kDecideGraceS)
                          : strFormat("did not answer within WEFT_SHRINK_TIMEOUT_S=%g s (hung?)",
                                      p_.timeoutS));
        return Status::ok();
      }
      pollfd fds[2] = {{fd, POLLIN, 0}, {p_.listenFd, POLLIN, 0}};
      poll(fds, 2, std::min(dl->remainingMs(), 200));
      if (fds[1].revents) acceptPending();
      if (excludedBy_ >= 0) return excluded();
      if (!fds[0].revents) continue;
      Frame f;
      Status st = readFrame(fd, kIoS, &f);
      if (!st.isOk()) {
        markGone(c, "closed the connection (" + st.message() + ")");
        return Status::ok();
      }
      if (f.from != c || f.attempt != p_.attempt ||
          (f.kind != Kind::Wait && f.kind != Kind::Decide && f.kind != Kind::Excluded)) {
        markGone(c, "answered out of turn");
        return Status::ok();
      }
      if (f.kind == Kind::Excluded) {
        excludedBy_ = c;
        return excluded();
      }
      if (f.kind == Kind::Wait) {
        if (!acked) dl = std::make_unique<Deadline>(p_.timeoutS + kDecideGraceS);
        acked = true;
        continue;
      }
      *done = true;
      return accept(f, out);
    }
  }

  // A member takes the coordinator's decision.
  Status accept(const Frame& d, Outcome* out) {
    const std::vector<int32_t>& m = d.ranks;
    const bool sorted = std::is_sorted(m.begin(), m.end()) &&
                        std::adjacent_find(m.begin(), m.end()) == m.end();
    const bool mine = std::find(m.begin(), m.end(), p_.rank) != m.end();
    net::Address root;
    if (!sorted || !net::Address::unpack(d.root, &root))
      return Status(WEFT_ERR_REMOTE,
                    strFormat("%s: rank %d sent a malformed decision", me().c_str(), d.from));
    // Proposals made to this rank by ranks the decision leaves out: tell
    // them, so they do not go on to decide among themselves.
    for (Parked& k : parked_) {
      if (std::find(m.begin(), m.end(), k.rank) == m.end())
        (void)sendFrame(k.fd, frame(Kind::Excluded));
      net::closeFd(&k.fd);
    }
    parked_.clear();
    if (!mine) {
      excludedBy_ = d.from;
      return excluded();
    }
    out->members.assign(m.begin(), m.end());
    idOf(root, secretOf(d.nonce), &out->id);
    out->log = log_ + strFormat(" decided by rank %d", d.from);
    return Status::ok();
  }

  Status coordinate(Outcome* out) {
    std::vector<char> heard(static_cast<size_t>(p_.nranks), 0);
    heard[p_.rank] = 1;
    Deadline dl(p_.timeoutS);
    uint64_t lastProbe = 0;
    size_t answered = 0;  // parked_[0, answered) were told Wait
    for (;;) {
      acceptPending();
      if (excludedBy_ >= 0) return excluded();
      for (; answered < parked_.size(); ++answered) {
        Parked& k = parked_[answered];
        if (heard[k.rank] || !sendFrame(k.fd, frame(Kind::Wait)).isOk()) {
          net::closeFd(&k.fd);  // a duplicate, or gone already
          continue;
        }
        heard[k.rank] = 1;
      }
      dropClosed(&heard, &answered);
      bool all = true;
      for (int r = 0; r < p_.nranks; ++r) all = all && (heard[r] || gone_[r]);
      if (all) break;
      if (dl.expired()) {
        for (int r = 0; r < p_.nranks; ++r) {
          if (heard[r] || gone_[r]) continue;
          markGone(r, strFormat("alive but silent for WEFT_SHRINK_TIMEOUT_S=%g s (hung?)",
                                p_.timeoutS));
        }
        break;
      }
      const uint64_t now = nowNs();
      if (now - lastProbe >= kProbeEveryNs) {
        lastProbe = now;
        probeSilent(heard);
      }
      std::vector<pollfd> fds;
      fds.push_back({p_.listenFd, POLLIN, 0});
      for (const Parked& k : parked_) fds.push_back({k.fd, POLLIN, 0});
      poll(fds.data(), fds.size(), std::min(dl.remainingMs(), 100));
    }
    // The last word of any other coordinator, before deciding.
    acceptPending();
    if (excludedBy_ >= 0) return excluded();
    // The decision: the members, the new comm's root on this rank's address.
    Frame d = frame(Kind::Decide);
    for (int r = 0; r < p_.nranks; ++r)
      if (heard[r] && !gone_[r]) d.ranks.push_back(r);
    WEFT_RETURN_IF_ERROR(randomNonce(&d.nonce));
    net::Address local = p_.addrs[p_.rank];
    local.setPort(0);
    WEFT_RETURN_IF_ERROR(startRootOn(p_.cfg, local, secretOf(d.nonce), &out->id));
    UniqueIdData idd;
    WEFT_RETURN_IF_ERROR(decodeUniqueId(out->id, &idd));
    memcpy(d.root, idd.rootAddr, sizeof d.root);
    for (Parked& k : parked_) {
      if (k.fd >= 0 && heard[k.rank]) (void)sendFrame(k.fd, d);
      net::closeFd(&k.fd);
    }
    parked_.clear();
    // Ranks counted as gone (given up on here or by the members: a dead
    // one refuses at once), and late proposers, learn they are out.
    for (int r = 0; r < p_.nranks; ++r)
      if (gone_[r] && !p_.gone[r]) notifyExcluded(r);
    acceptPending();
    for (Parked& k : parked_) {
      (void)sendFrame(k.fd, frame(Kind::Excluded));
      net::closeFd(&k.fd);
    }
    parked_.clear();
    out->members.assign(d.ranks.begin(), d.ranks.end());
    out->log = log_ + " decided by this rank";
    return Status::ok();
  }

  // A member that closed its connection before the decision died during
  // the shrink (or gave up on this rank): it is gone.
  void dropClosed(std::vector<char>* heard, size_t* answered) {
    for (size_t i = 0; i < *answered;) {
      Parked& k = parked_[i];
      bool closed = k.fd < 0;
      if (!closed) {
        pollfd pf{k.fd, POLLIN, 0};
        if (poll(&pf, 1, 0) > 0) {
          char b;
          closed = recv(k.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
          if (closed && (*heard)[k.rank])
            markGone(k.rank, "closed its connection during the shrink (died?)");
        }
      }
      if (closed) {
        if (k.fd >= 0) (*heard)[k.rank] = 0;
        net::closeFd(&k.fd);
        parked_.erase(parked_.begin() + static_cast<std::ptrdiff_t>(i));
        --*answered;
        continue;
      }
      ++i;
    }
  }

  // Ranks not heard from: a refused connection means their process is gone.
  void probeSilent(const std::vector<char>& heard) {
    for (int r = 0; r < p_.nranks; ++r) {
      if (heard[r] || gone_[r]) continue;
      int fd = -1;
      const int e = net::tryConnect(p_.addrs[r], Deadline(0.2), &fd);
      if (e == 0) {
        net::closeFd(&fd);
      } else if (e != ETIMEDOUT && goneError(e)) {
        markGone(r, strFormat("its process is gone (%s at %s)", strerror(e),
                              p_.addrs[r].toString().c_str()));
      }
    }
  }

  void notifyExcluded(int r) {
    int fd = -1;
    if (net::tryConnect(p_.addrs[r], Deadline(0.5), &fd) != 0) return;
    (void)sendFrame(fd, frame(Kind::Excluded));
    net::closeFd(&fd);
  }

  // The new comm's job secret: only ranks holding the parent's key can
  // derive it from the nonce, which alone travels.
  uint64_t secretOf(const Nonce& nonce) const {
    unsigned char ctx[kNonceBytes + 4];
    memcpy(ctx, nonce.data(), kNonceBytes);
    memcpy(ctx + kNonceBytes, &p_.attempt, 4);
    const Key k = deriveKey(p_.key, "weft shrink secret", ctx, sizeof ctx);
    uint64_t s;
    memcpy(&s, k.data(), sizeof s);
    return s;
  }

  Params p_;
  std::vector<char> gone_;
  std::vector<std::string> why_;
  std::vector<Parked> parked_;  // proposals accepted, not yet answered for good
  int excludedBy_ = -1;         // a coordinator told this rank it is out
  std::string log_;
};

}  // namespace

Status readFrame(int fd, const Link& link, double seconds, Frame* f) {
  Deadline dl(seconds);
  uint8_t h[kHeaderBytes];
  WEFT_RETURN_IF_ERROR(net::recvAll(fd, h, sizeof h, dl));
  size_t len = 0;
  std::string bad = checkHeader(h, link.commId, link.nranks, &len);
  if (!bad.empty()) return Status(WEFT_ERR_REMOTE, "a frame refused: " + bad);
  std::string payload(len, '\0');
  uint8_t mac[kMacBytes];
  WEFT_RETURN_IF_ERROR(net::recvAll(fd, payload.data(), len, dl));
  WEFT_RETURN_IF_ERROR(net::recvAll(fd, mac, sizeof mac, dl));
  bad = decode(link.key, h, reinterpret_cast<const uint8_t*>(payload.data()), len, mac,
               link.nranks, f);
  if (!bad.empty()) return Status(WEFT_ERR_REMOTE, "a frame refused: " + bad);
  return Status::ok();
}

Status sendFrame(int fd, const Link& link, const Frame& f) {
  const std::string bytes = encode(link.key, link.commId, f);
  return net::sendAll(fd, bytes.data(), bytes.size(), Deadline(kIoS));
}

namespace {

// `f` to every other rank's bootstrap socket: best effort, about `seconds`.
void announce(const Link& link, const std::vector<net::Address>& addrs, const Frame& f,
              double seconds) {
  const std::string bytes = encode(link.key, link.commId, f);
  // Every connect at once, then the frame to those that answered.
  std::vector<int> fds(addrs.size(), -1);
  std::vector<pollfd> pending;
  for (size_t r = 0; r < addrs.size(); ++r) {
    if (static_cast<int>(r) == link.rank) continue;
    int s = socket(addrs[r].ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) continue;
    if (connect(s, reinterpret_cast<const sockaddr*>(&addrs[r].ss), addrs[r].len) != 0 &&
        errno != EINPROGRESS) {
      close(s);
      continue;
    }
    fds[r] = s;
  }
  Deadline dl(seconds);
  for (;;) {
    pending.clear();
    for (int s : fds)
      if (s >= 0) pending.push_back({s, POLLOUT, 0});
    if (pending.empty() || dl.expired()) break;
    if (poll(pending.data(), pending.size(), dl.remainingMs()) <= 0) break;
    for (const pollfd& p : pending) {
      if (!p.revents) continue;
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) (void)send(p.fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      for (int& s : fds)
        if (s == p.fd) net::closeFd(&s);
    }
  }
  for (int& s : fds) net::closeFd(&s);
}

}  // namespace

void announceRevoke(const Link& link, const std::vector<net::Address>& addrs, uint32_t attempt,
                    double seconds) {
  Frame f;
  f.kind = Kind::Revoked;
  f.from = link.rank;
  f.attempt = attempt;
  announce(link, addrs, f, seconds);
}

void announceStuck(const Link& link, const std::vector<net::Address>& addrs,
                   const std::vector<int>& stuck, double seconds) {
  Frame f;
  f.kind = Kind::Stuck;
  f.from = link.rank;
  for (int r : stuck)
    if (r >= 0 && r < link.nranks && r != link.rank) f.ranks.push_back(r);
  if (f.ranks.empty()) return;
  announce(link, addrs, f, seconds);
}

int takeEarly(int listenFd, const Link& link, std::vector<Early>* keep,
              std::vector<Frame>* stuck) {
  int first = -1;
  for (;;) {
    int fd = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return first;
    Early e;
    if (!net::setNonBlocking(fd, false).isOk() || !readFrame(fd, link, 1.0, &e.frame).isOk()) {
      close(fd);  // a scanner, a stranger: nothing to do with this comm
      continue;
    }
    if (e.frame.kind == Kind::Stuck) {  // a notice only: nothing to answer
      close(fd);
      if (stuck) stuck->push_back(e.frame);
      continue;
    }
    if (first < 0) first = e.frame.from;
    e.fd = fd;
    keep->push_back(e);  // the shrink answers a proposal, and must see an exclusion
  }
}

Status run(const Params& p, Outcome* out) {
  if (p.rank < 0 || p.rank >= p.nranks || static_cast<int>(p.addrs.size()) != p.nranks)
    return Status(WEFT_ERR_INTERNAL, "shrink: inconsistent parameters (a weft bug)");
  if (p.listenFd < 0)
    return Status(WEFT_ERR_INVALID_USAGE,
                  "shrink: the communicator's bootstrap socket is closed (it was aborted or "
                  "destroyed)");
  Agreement a(p);
  return a.run(out);
}

}  // namespace agree
}  // namespace weft
