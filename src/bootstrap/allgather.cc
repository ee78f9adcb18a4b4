// Bootstrap::allgather / barrier / shutdown over the ring.
//
// Ring allgather: n-1 steps; in step s a rank sends the blob of rank
// (rank - s) to rank+1 and receives the blob of rank (rank - s - 1) from
// rank-1. Sends and receives of a step progress together in one poll loop,
// so large blobs cannot deadlock on full socket buffers. Every frame is a
// FrameHeader {magic, origin, round, len} and the blob; a frame whose round
// or origin differs from the expected one is an internal error. Any failure
// closes the ring (the byte streams are no longer in step), so later calls
// fail at once with INVALID_USAGE.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "core/clock.h"
#include "core/log.h"
#include "net/socket.h"

namespace weft {

namespace {

using boot::FrameHeader;

// One direction of one step: the header, then the payload.
struct SendState {
  FrameHeader hdr{};
  const std::string* blob = nullptr;
  size_t off = 0;  // bytes of header + payload sent
  size_t total() const { return sizeof hdr + blob->size(); }
  bool done() const { return off == total(); }
};

struct RecvState {
  FrameHeader hdr{};
  std::string* blob = nullptr;
  size_t off = 0;  // bytes of header + payload received
  bool haveHeader = false;
  bool done() const { return haveHeader && off == sizeof hdr + hdr.len; }
};

bool wouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK; }
bool peerGone(int err) { return err == EPIPE || err == ECONNRESET || err == ENOTCONN; }

}  // namespace

Bootstrap::~Bootstrap() { shutdown(); }

void Bootstrap::shutdown() {
  // ::shutdown first wakes a thread that may be waiting in poll() on them.
  for (int* fd : {&nextFd_, &prevFd_, &listenFd_}) {
    if (*fd >= 0) ::shutdown(*fd, SHUT_RDWR);
    net::closeFd(fd);
  }
}

Status Bootstrap::barrier(double timeoutS) {
  std::vector<std::string> all;
  return allgather(std::string(), &all, timeoutS);
}

Status Bootstrap::allgather(const std::string& mine, std::vector<std::string>* all,
                            double timeoutS) {
  if (!all) return invalidArgument("bootstrap allgather: output is NULL");
  const int n = nranks_;
  const uint64_t round = ++round_;
  try {
    all->assign(static_cast<size_t>(n), std::string());
    (*all)[static_cast<size_t>(rank_)] = mine;
  } catch (const std::bad_alloc&) {
    return Status(WEFT_ERR_SYSTEM, "bootstrap allgather: out of memory");
  }
  if (n == 1) return Status::ok();
  if (nextFd_ < 0 || prevFd_ < 0)
    return invalidUsage(strFormat("bootstrap allgather: rank %d: the ring is closed (shut down "
                                  "or failed before)",
                                  rank_));
  if (mine.size() > boot::kMaxBlobBytes)
    return invalidArgument(strFormat("bootstrap allgather: blob of %zu bytes exceeds %llu",
                                     mine.size(),
                                     static_cast<unsigned long long>(boot::kMaxBlobBytes)));

  const int next = (rank_ + 1) % n;
  const int prev = (rank_ - 1 + n) % n;
  Deadline dl(timeoutS);
  auto fail = [&](weft_result_t code, const std::string& msg) {
    WEFT_WARN(kBootstrap, "rank %d: %s", rank_, msg.c_str());
    shutdown();
    return Status(code, msg);
  };

  for (int step = 0; step < n - 1; ++step) {
    const int sendOrigin = (rank_ - step + n) % n;
    const int recvOrigin = (rank_ - step - 1 + 2 * n) % n;
    SendState tx;
    tx.blob = &(*all)[static_cast<size_t>(sendOrigin)];
    tx.hdr = FrameHeader{boot::kFrameMagic, sendOrigin, round, tx.blob->size()};
    RecvState rx;
    rx.blob = &(*all)[static_cast<size_t>(recvOrigin)];

    while (!tx.done() || !rx.done()) {
      bool progress = false;
      // Send as much as the socket takes.
      while (!tx.done()) {
        const char* p;
        size_t len;
        if (tx.off < sizeof tx.hdr) {
          p = reinterpret_cast<const char*>(&tx.hdr) + tx.off;
          len = sizeof tx.hdr - tx.off;
        } else {
          p = tx.blob->data() + (tx.off - sizeof tx.hdr);
          len = tx.total() - tx.off;
        }
        ssize_t k = send(nextFd_, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
          tx.off += static_cast<size_t>(k);
          progress = true;
          continue;
        }
        int err = k < 0 ? errno : EAGAIN;
        if (err == EINTR) continue;
        if (wouldBlock(err)) break;
        if (peerGone(err))
          return fail(WEFT_ERR_REMOTE,
                      strFormat("bootstrap allgather: rank %d closed the connection (%s)", next,
                                strerror(err)));
        return fail(WEFT_ERR_SYSTEM, strFormat("bootstrap allgather: send to rank %d: %s", next,
                                               strerror(err)));
      }
      // Receive as much as has arrived.
      while (!rx.done()) {
        char* p;
        size_t len;
        if (!rx.haveHeader) {
          p = reinterpret_cast<char*>(&rx.hdr) + rx.off;
          len = sizeof rx.hdr - rx.off;
        } else {
          p = &(*rx.blob)[0] + (rx.off - sizeof rx.hdr);
          len = sizeof rx.hdr + rx.hdr.len - rx.off;
        }
        ssize_t k = recv(prevFd_, p, len, MSG_DONTWAIT);
        if (k == 0)
          return fail(WEFT_ERR_REMOTE,
                      strFormat("bootstrap allgather: rank %d closed the connection", prev));
        if (k < 0) {
          int err = errno;
          if (err == EINTR) continue;
          if (wouldBlock(err)) break;
          if (peerGone(err))
            return fail(WEFT_ERR_REMOTE,
                        strFormat("bootstrap allgather: rank %d closed the connection (%s)",
                                  prev, strerror(err)));
          return fail(WEFT_ERR_SYSTEM, strFormat("bootstrap allgather: receive from rank %d: %s",
                                                 prev, strerror(err)));
        }
        rx.off += static_cast<size_t>(k);
        progress = true;
        if (!rx.haveHeader && rx.off == sizeof rx.hdr) {
          const FrameHeader& h = rx.hdr;
          if (h.magic != boot::kFrameMagic)
            return fail(WEFT_ERR_INTERNAL,
                        strFormat("bootstrap allgather: bad frame (magic 0x%08x) from rank %d",
                                  h.magic, prev));
          if (h.round != round || h.origin != recvOrigin)
            return fail(WEFT_ERR_INTERNAL,
                        strFormat("bootstrap allgather: from rank %d expected round %llu origin "
                                  "rank %d, got round %llu origin rank %d",
                                  prev, static_cast<unsigned long long>(round), recvOrigin,
                                  static_cast<unsigned long long>(h.round), h.origin));
          if (h.len > boot::kMaxBlobBytes)
            return fail(WEFT_ERR_INTERNAL,
                        strFormat("bootstrap allgather: rank %d announced a blob of %llu bytes",
                                  prev, static_cast<unsigned long long>(h.len)));
          try {
            rx.blob->resize(h.len);
          } catch (const std::bad_alloc&) {
            return fail(WEFT_ERR_SYSTEM, "bootstrap allgather: out of memory");
          }
          rx.haveHeader = true;
        }
      }
      if (tx.done() && rx.done()) break;
      if (progress) continue;

      pollfd pfds[2];
      nfds_t np = 0;
      if (!tx.done()) pfds[np++] = pollfd{nextFd_, POLLOUT, 0};
      if (!rx.done()) pfds[np++] = pollfd{prevFd_, POLLIN, 0};
      int rc = poll(pfds, np, dl.remainingMs());
      if (rc < 0) {
        if (errno == EINTR) continue;
        return fail(WEFT_ERR_SYSTEM, std::string("bootstrap allgather: poll: ") + strerror(errno));
      }
      if (rc == 0 && dl.expired()) {
        if (!rx.done())
          return fail(WEFT_ERR_TIMEOUT,
                      strFormat("bootstrap allgather: no data from rank %d within %g s", prev,
                                timeoutS));
        return fail(WEFT_ERR_TIMEOUT,
                    strFormat("bootstrap allgather: rank %d took no data within %g s", next,
                              timeoutS));
      }
    }
  }
  return Status::ok();
}

}  // namespace weft
