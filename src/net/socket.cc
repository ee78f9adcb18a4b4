// Sockets bounded by deadlines: listen, connect (with retry), accept, and
// exact sends / receives. Every wait is a poll() bounded by a Deadline; EINTR
// is retried; sends use MSG_NOSIGNAL so a dead peer never raises SIGPIPE.
#include "net/socket.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>

#include "core/log.h"

namespace weft {
namespace net {

namespace {

// "10.0.0.2:5000" for a connected socket, else "fd N".
std::string peerName(int fd) {
  Address a;
  a.len = sizeof a.ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) == 0) return a.toString();
  return "fd " + std::to_string(fd);
}

std::string localName(int fd) {
  Address a;
  a.len = sizeof a.ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a.ss), &a.len) == 0) return a.toString();
  return "fd " + std::to_string(fd);
}

// Waits for `events` on fd until the deadline. Returns 1 when ready, 0 on
// timeout, -1 with errno on a poll failure.
int waitFd(int fd, short events, const Deadline& dl) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, dl.remainingMs());
    if (rc > 0) return 1;
    if (rc == 0) {
      if (dl.expired()) return 0;
      continue;
    }
    if (errno == EINTR) continue;
    return -1;
  }
}

// Errors a later attempt may not see: nobody listens yet, or the route or
// link to the peer is down for now (a link that comes back, a route being
// set up). Retried until the deadline (WEFT_BOOTSTRAP_TIMEOUT_S).
bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ECONNRESET || err == ECONNABORTED || err == ETIMEDOUT ||
         err == EAGAIN || err == EHOSTUNREACH || err == ENETUNREACH || err == ENETDOWN ||
         err == EHOSTDOWN;
}

bool sameEndpoint(int fd) {
  Address l, p;
  l.len = p.len = sizeof l.ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&l.ss), &l.len) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&p.ss), &p.len) != 0) return false;
  return l.len == p.len && memcmp(&l.ss, &p.ss, l.len) == 0;
}

// One connect attempt. Returns 0 and a connected fd, or an errno.
int connectOnce(const Address& addr, const Deadline& dl, int* out) {
  int fd = socket(addr.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int err = 0;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
    err = errno;
    if (err == EINPROGRESS || err == EINTR) {
      int w = waitFd(fd, POLLOUT, dl);
      if (w == 0) {
        err = ETIMEDOUT;
      } else if (w < 0) {
        err = errno;
      } else {
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
  }
  // Connecting to a free port of this host can, rarely, connect the socket
  // to itself (TCP simultaneous open); treat that as "refused".
  if (err == 0 && sameEndpoint(fd)) err = ECONNREFUSED;
  if (err != 0) {
    close(fd);
    return err;
  }
  *out = fd;
  return 0;
}

}  // namespace

Status setNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return systemError(strFormat("fcntl(F_GETFL) on fd %d", fd), errno);
  int nflags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (nflags != flags && fcntl(fd, F_SETFL, nflags) < 0)
    return systemError(strFormat("fcntl(F_SETFL) on fd %d", fd), errno);
  return Status::ok();
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void setBufferSizes(int fd, int bytes) {
  if (bytes <= 0) return;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

void closeFd(int* fd) {
  if (fd && *fd >= 0) {
    close(*fd);  // never retried on EINTR: Linux releases the fd anyway
    *fd = -1;
  }
}

Status listenOn(const Address& addr, int backlog, int* fd, Address* bound) {
  const std::string where = addr.toString();
  int s = socket(addr.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) {
    int err = errno;
    WEFT_WARN(kBootstrap, "socket() for %s failed: %s", where.c_str(), strerror(err));
    return systemError("socket for " + where, err);
  }
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
    int err = errno;
    close(s);
    WEFT_WARN(kBootstrap, "bind to %s failed: %s", where.c_str(), strerror(err));
    return systemError("bind to " + where, err);
  }
  if (listen(s, backlog) != 0) {
    int err = errno;
    close(s);
    WEFT_WARN(kBootstrap, "listen on %s failed: %s", where.c_str(), strerror(err));
    return systemError("listen on " + where, err);
  }
  if (bound) {
    Address b;
    b.len = sizeof b.ss;
    if (getsockname(s, reinterpret_cast<sockaddr*>(&b.ss), &b.len) != 0) {
      int err = errno;
      close(s);
      return systemError("getsockname of the socket listening on " + where, err);
    }
    *bound = b;
  }
  *fd = s;
  return Status::ok();
}

Status connectTo(const Address& addr, const Deadline& dl, int* fd) {
  const uint64_t start = nowNs();
  int backoffMs = 5;
  int lastErr = 0;
  int attempts = 0;
  for (;;) {
    int s = -1;
    int err = connectOnce(addr, dl, &s);
    ++attempts;
    if (err == 0) {
      Status st = setNonBlocking(s, false);
      if (!st.isOk()) {
        close(s);
        return st;
      }
      setNoDelay(s);
      *fd = s;
      return Status::ok();
    }
    lastErr = err;
    if (!retryableConnectError(err)) {
      WEFT_INFO(kBootstrap, "connect to %s failed: %s", addr.toString().c_str(), strerror(err));
      return systemError("connect to " + addr.toString(), err);
    }
    if (dl.expired()) break;
    int sleepMs = std::min(backoffMs, dl.remainingMs());
    poll(nullptr, 0, sleepMs);  // an EINTR just shortens the pause
    backoffMs = std::min(backoffMs * 2, 200);
    if (dl.expired()) break;
  }
  double waited = static_cast<double>(nowNs() - start) * 1e-9;
  std::string msg = strFormat("connect to %s: no connection within %.1f s (%d attempts, last: %s)",
                              addr.toString().c_str(), waited, attempts, strerror(lastErr));
  WEFT_INFO(kBootstrap, "%s", msg.c_str());
  return Status(WEFT_ERR_TIMEOUT, msg);
}

int tryConnect(const Address& addr, const Deadline& dl, int* fd) {
  int s = -1;
  int err = connectOnce(addr, dl, &s);
  if (err != 0) return err;
  Status st = setNonBlocking(s, false);
  if (!st.isOk()) {
    close(s);
    return EIO;
  }
  setNoDelay(s);
  *fd = s;
  return 0;
}

Status acceptOne(int listenFd, const Deadline& dl, int* fd, Address* peer) {
  for (;;) {
    Address a;
    a.len = sizeof a.ss;
    int s = accept4(listenFd, reinterpret_cast<sockaddr*>(&a.ss), &a.len, SOCK_CLOEXEC);
    if (s >= 0) {
      // Accepted sockets do not inherit O_NONBLOCK on Linux; be explicit.
      Status st = setNonBlocking(s, false);
      if (!st.isOk()) {
        close(s);
        return st;
      }
      setNoDelay(s);
      *fd = s;
      if (peer) *peer = a;
      return Status::ok();
    }
    int err = errno;
    if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      WEFT_WARN(kBootstrap, "accept on %s failed: %s", localName(listenFd).c_str(),
                strerror(err));
      return systemError("accept on " + localName(listenFd), err);
    }
    int w = waitFd(listenFd, POLLIN, dl);
    if (w < 0) return systemError("poll on " + localName(listenFd), errno);
    if (w == 0) {
      std::string msg = "accept on " + localName(listenFd) + ": no connection before the deadline";
      WEFT_INFO(kBootstrap, "%s", msg.c_str());
      return Status(WEFT_ERR_TIMEOUT, msg);
    }
  }
}

Status sendAll(int fd, const void* buf, size_t len, const Deadline& dl) {
  const char* p = static_cast<const char*>(buf);
  size_t done = 0;
  while (done < len) {
    ssize_t n = send(fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    int err = n < 0 ? errno : EAGAIN;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      int w = waitFd(fd, POLLOUT, dl);
      if (w > 0) continue;
      if (w < 0) return systemError("poll on socket to " + peerName(fd), errno);
      std::string msg = strFormat("send to %s: timed out with %zu of %zu bytes sent",
                                  peerName(fd).c_str(), done, len);
      WEFT_INFO(kBootstrap, "%s", msg.c_str());
      return Status(WEFT_ERR_TIMEOUT, msg);
    }
    std::string who = peerName(fd);
    if (err == EPIPE || err == ECONNRESET || err == ENOTCONN) {
      std::string msg = strFormat("send to %s: connection closed by the peer (%s)", who.c_str(),
                                  strerror(err));
      WEFT_INFO(kBootstrap, "%s", msg.c_str());
      return Status(WEFT_ERR_REMOTE, msg);
    }
    WEFT_INFO(kBootstrap, "send to %s failed: %s", who.c_str(), strerror(err));
    return systemError("send to " + who, err);
  }
  return Status::ok();
}

Status recvAll(int fd, void* buf, size_t len, const Deadline& dl) {
  char* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < len) {
    ssize_t n = recv(fd, p + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      std::string msg = strFormat("recv from %s: connection closed by the peer after %zu of %zu "
                                  "bytes",
                                  peerName(fd).c_str(), done, len);
      WEFT_INFO(kBootstrap, "%s", msg.c_str());
      return Status(WEFT_ERR_REMOTE, msg);
    }
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      int w = waitFd(fd, POLLIN, dl);
      if (w > 0) continue;
      if (w < 0) return systemError("poll on socket from " + peerName(fd), errno);
      std::string msg = strFormat("recv from %s: timed out with %zu of %zu bytes received",
                                  peerName(fd).c_str(), done, len);
      WEFT_INFO(kBootstrap, "%s", msg.c_str());
      return Status(WEFT_ERR_TIMEOUT, msg);
    }
    std::string who = peerName(fd);
    if (err == ECONNRESET || err == ENOTCONN || err == EPIPE) {
      std::string msg = strFormat("recv from %s: connection closed by the peer (%s)", who.c_str(),
                                  strerror(err));
      WEFT_INFO(kBootstrap, "%s", msg.c_str());
      return Status(WEFT_ERR_REMOTE, msg);
    }
    WEFT_INFO(kBootstrap, "recv from %s failed: %s", who.c_str(), strerror(err));
    return systemError("recv from " + who, err);
  }
  return Status::ok();
}

}  // namespace net
}  // namespace weft
