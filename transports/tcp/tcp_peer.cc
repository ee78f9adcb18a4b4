#include "transports/tcp/tcp_peer.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cerrno>
#include <cstring>

#include "core/log.h"

namespace weft {
namespace tcp {
namespace {

constexpr int kMaxIov = 64;
constexpr size_t kHdr = sizeof(PartHeader);
constexpr size_t kSpill = 64 << 10;

// Fault injection (short): cuts an iovec array to its first `limit` bytes.
int clipIov(iovec* iov, int cnt, size_t limit) {
  for (int i = 0; i < cnt; ++i) {
    if (iov[i].iov_len >= limit) {
      iov[i].iov_len = limit;
      return i + 1;
    }
    limit -= iov[i].iov_len;
  }
  return cnt;
}

// Fault injection (corrupt): one bit of a field the receiver checks.
void corruptHeader(PartHeader* h, uint64_t r) {
  switch (r % 5) {
    case 0: flipBit(&h->magic, sizeof h->magic, r >> 8); break;
    case 1: flipBit(&h->seq, sizeof h->seq, r >> 8); break;
    case 2: flipBit(&h->tag, sizeof h->tag, r >> 8); break;
    case 3: flipBit(&h->msgLen, sizeof h->msgLen, r >> 8); break;
    default: flipBit(&h->partLen, sizeof h->partLen, r >> 8); break;
  }
}

}  // namespace

TcpPeer::TcpPeer(int rank, int peer, const net::Address& remote, const std::vector<int>& fds,
                 int epfd, int64_t* pending, uint64_t* activity)
    : rank_(rank),
      peer_(peer),
      remote_(remote.toString()),
      epfd_(epfd),
      streams_(fds.size()),
      nsocks_(static_cast<int>(fds.size())),
      pending_(pending),
      activity_(activity),
      state_("tcp", rank) {
  for (size_t i = 0; i < fds.size(); ++i) {
    streams_[i].fd = fds[i];
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = (static_cast<uint64_t>(peer) << 32) | i;
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fds[i], &ev) != 0)
      fail(systemError(strFormat("tcp transport: epoll_ctl(ADD) for rank %d", peer), errno));
  }
}

TcpPeer::~TcpPeer() {
  for (Stream& s : streams_) net::closeFd(&s.fd);
}

Status TcpPeer::postSend(const void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) {
  if (state_.refuses(mem)) return state_.checkPost(mem);
  if (faults_) {
    if (faults_->fire(FaultKind::Delay, "tcp send"))
      std::this_thread::sleep_for(std::chrono::milliseconds(faults_->delayMs()));
    if (faults_->fire(FaultKind::Drop, "tcp send")) {
      hangUp();
      return lost("dropped by fault injection (WEFT_TEST_FAULTS)");
    }
  }
  const uint64_t seq = sendSeq_++;
  const int n = numParts(len, nsocks_);
  sendOps_.push_back({c, n});
  ++*pending_;
  const int first = firstStream(len, seq, nsocks_);
  int fresh[16];  // streams that were idle: write at once
  int nfresh = 0;
  for (int j = 0; j < n; ++j) {
    int sock = (first + j) % nsocks_;
    size_t off, plen;
    partRange(len, n, j, &off, &plen);
    SendPart p;
    p.hdr = PartHeader{kDataMagic, static_cast<uint32_t>(seq), tag, len, plen, c->stamp};
    if (faults_ && j == 0 && faults_->fire(FaultKind::Corrupt, "tcp send"))
      corruptHeader(&p.hdr, faults_->draw());
    p.data = static_cast<const char*>(buf) + off;
    p.len = plen;
    p.done = 0;
    p.op = seq;
    Stream& s = streams_[sock];
    s.sendq.push_back(p);
    if (s.sendq.size() == 1 && !s.hup && nfresh < 16) fresh[nfresh++] = sock;
  }
  for (int i = 0; i < nfresh; ++i) {
    Status st = flushSend(streams_[fresh[i]]);
    if (st.isError()) return st;
  }
  return seq < sendBase_ ? Status::ok() : Status::inProgress();
}

Status TcpPeer::postRecv(void* buf, size_t len, uint64_t tag, MemType mem, Completion* c) {
  if (state_.refuses(mem)) return state_.checkPost(mem);
  const uint64_t seq = recvSeq_++;
  const int n = numParts(len, nsocks_);
  recvOps_.push_back({c, n});
  ++*pending_;
  const int first = firstStream(len, seq, nsocks_);
  for (int j = 0; j < n; ++j) {
    size_t off, plen;
    partRange(len, n, j, &off, &plen);
    RecvPart p;
    p.hdr = PartHeader{};
    p.data = static_cast<char*>(buf) + off;
    p.len = plen;
    p.done = 0;
    p.op = seq;
    p.tag = tag;
    p.msgLen = len;
    streams_[(first + j) % nsocks_].recvq.push_back(p);
  }
  // Bytes already spilled for this message raise no epoll event: take them now.
  for (int j = 0; j < n && j < nsocks_; ++j) {
    const int sock = (first + j) % nsocks_;
    if (streams_[sock].spillLen > 0) WEFT_RETURN_IF_ERROR(flushRecv(streams_[sock], sock));
  }
  return Status::inProgress();
}

void TcpPeer::partDone(RingQueue<Op>& ops, uint64_t* base, uint64_t op) {
  Op& o = ops[op - *base];
  if (--o.partsLeft == 0) {
    --*pending_;
    o.c->finish();
  }
  while (!ops.empty() && ops.front().partsLeft == 0) {
    ops.pop_front();
    ++*base;
  }
}

void TcpPeer::armOut(Stream& s, bool on) {
  if (s.outArmed == on || s.hup) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (on ? static_cast<uint32_t>(EPOLLOUT) : 0u);
  ev.data.u64 = (static_cast<uint64_t>(peer_) << 32) | static_cast<uint64_t>(&s - streams_.data());
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, s.fd, &ev) == 0) s.outArmed = on;
}

void TcpPeer::markHup(Stream& s, int sock) {
  if (s.hup) return;
  epoll_ctl(epfd_, EPOLL_CTL_DEL, s.fd, nullptr);
  s.hup = true;
  s.outArmed = false;
  ++hups_;
  WEFT_TRACE(kTransport, "tcp transport: rank %d: rank %d closed stream %d", rank_, peer_, sock);
}

Status TcpPeer::flushSend(Stream& s) {
  iovec iov[kMaxIov];
  while (!s.sendq.empty()) {
    int cnt = 0;
    size_t total = 0;
    for (size_t i = 0; i < s.sendq.size() && cnt + 2 <= kMaxIov; ++i) {
      SendPart& p = s.sendq[i];
      if (p.done < kHdr) {
        iov[cnt++] = {reinterpret_cast<char*>(&p.hdr) + p.done, kHdr - p.done};
        total += kHdr - p.done;
      }
      size_t dataDone = p.done > kHdr ? p.done - kHdr : 0;
      if (p.len > dataDone) {
        iov[cnt++] = {const_cast<char*>(p.data) + dataDone, p.len - dataDone};
        total += p.len - dataDone;
      }
    }
    if (faults_ && faults_->fire(FaultKind::Short, "tcp write"))
      cnt = clipIov(iov, cnt, 1 + faults_->draw() % 64);
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(cnt);
    ssize_t n = sendmsg(s.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        armOut(s, true);
        return Status::ok();
      }
      return lost(strerror(errno));
    }
    ++*activity_;
    size_t left = static_cast<size_t>(n);
    while (!s.sendq.empty()) {
      SendPart& p = s.sendq.front();
      size_t take = std::min(left, kHdr + p.len - p.done);
      p.done += take;
      left -= take;
      if (p.done < kHdr + p.len) break;
      uint64_t op = p.op;
      s.sendq.pop_front();
      partDone(sendOps_, &sendBase_, op);
    }
    if (static_cast<size_t>(n) < total) {  // the socket buffer is full
      armOut(s, true);
      return Status::ok();
    }
  }
  armOut(s, false);
  return Status::ok();
}

Status TcpPeer::checkHeader(const RecvPart& p, int sock) {
  const PartHeader& h = p.hdr;
  switch (checkPartHeader(h, p.tag, p.msgLen, p.op, p.len)) {
    case HeaderFault::kNone:
      break;
    case HeaderFault::kMagic:
      return fail(Status(WEFT_ERR_REMOTE,
                         strFormat("garbage from rank %d (%s) on tcp stream %d to rank %d: bad "
                                   "magic 0x%08x",
                                   peer_, remote_.c_str(), sock, rank_, h.magic)));
    case HeaderFault::kMismatch:
      return fail(mismatchError("tcp", rank_, peer_,
                                strFormat("rank %d (%s)", peer_, remote_.c_str()), p.op,
                                {p.tag, p.msgLen}, {h.tag, h.msgLen}));
    case HeaderFault::kOutOfStep:
      return fail(
          Status(WEFT_ERR_INTERNAL,
                 strFormat("tcp stream %d from rank %d (%s) to rank %d out of step: part of "
                           "message #%u (%llu bytes) where #%u (%zu bytes) was expected",
                           sock, peer_, remote_.c_str(), rank_, h.seq,
                           static_cast<unsigned long long>(h.partLen), static_cast<uint32_t>(p.op),
                           p.len)));
  }
  recvOps_[p.op - recvBase_].c->stamp = h.stamp;
  return Status::ok();
}

Status TcpPeer::absorb(Stream& s, int sock, const char* src, size_t n, size_t* took) {
  *took = 0;
  while (!s.recvq.empty() && *took < n) {
    RecvPart& p = s.recvq.front();
    size_t take = std::min(n - *took, kHdr + p.len - p.done);
    const char* from = src + *took;
    *took += take;
    if (p.done < kHdr) {
      const size_t h = std::min(take, kHdr - p.done);
      memcpy(reinterpret_cast<char*>(&p.hdr) + p.done, from, h);
      p.done += h;
      from += h;
      take -= h;
      if (p.done == kHdr) WEFT_RETURN_IF_ERROR(checkHeader(p, sock));
    }
    if (take) {
      memcpy(p.data + (p.done - kHdr), from, take);
      p.done += take;
    }
    if (p.done < kHdr + p.len) break;
    const uint64_t op = p.op;
    s.recvq.pop_front();
    partDone(recvOps_, &recvBase_, op);
  }
  return Status::ok();
}

Status TcpPeer::flushRecv(Stream& s, int sock) {
  // Spilled bytes first: they came before anything still in the socket.
  if (s.spillLen > 0) {
    size_t took = 0;
    WEFT_RETURN_IF_ERROR(absorb(s, sock, s.spill.data() + s.spillHead, s.spillLen, &took));
    s.spillHead += took;
    s.spillLen -= took;
    if (s.spillLen > 0) return Status::ok();  // nothing posted takes the rest yet
    s.spillHead = 0;
    if (s.recvq.empty()) return Status::ok();
  }
  iovec iov[kMaxIov];
  for (;;) {
    int cnt = 0;
    size_t total = 0, i = 0;
    for (; i < s.recvq.size() && cnt + 2 <= kMaxIov; ++i) {
      RecvPart& p = s.recvq[i];
      if (p.done < kHdr) {
        iov[cnt++] = {reinterpret_cast<char*>(&p.hdr) + p.done, kHdr - p.done};
        total += kHdr - p.done;
      }
      size_t dataDone = p.done > kHdr ? p.done - kHdr : 0;
      if (p.len > dataDone) {
        iov[cnt++] = {p.data + dataDone, p.len - dataDone};
        total += p.len - dataDone;
      }
    }
    // Every posted part is in the array and they are small: read on into
    // the spill buffer (kept in order: it is the last iovec).
    const bool spill = i == s.recvq.size() && cnt < kMaxIov && total < kSpill;
    if (spill) {
      if (s.spill.empty()) s.spill.resize(kSpill);
      iov[cnt++] = {s.spill.data(), kSpill};
    }
    if (cnt == 0) return Status::ok();
    if (faults_ && faults_->fire(FaultKind::Short, "tcp read"))
      cnt = clipIov(iov, cnt, 1 + faults_->draw() % 64);
    ssize_t n = readv(s.fd, iov, cnt);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
      return lost(strerror(errno));
    }
    if (n == 0) {
      // The peer is gone. With nothing posted that is no loss yet: what it
      // sent before is in the spill buffer for the receives to come.
      if (!s.recvq.empty()) return lost("closed by the peer");
      markHup(s, sock);
      return Status::ok();
    }
    ++*activity_;
    const size_t got = static_cast<size_t>(n);
    // The posted parts take what the kernel put in their iovecs, in order.
    size_t left = std::min(got, total);
    while (!s.recvq.empty() && left > 0) {
      RecvPart& p = s.recvq.front();
      bool hadHeader = p.done >= kHdr;
      size_t take = std::min(left, kHdr + p.len - p.done);
      p.done += take;
      left -= take;
      if (!hadHeader && p.done >= kHdr) WEFT_RETURN_IF_ERROR(checkHeader(p, sock));
      if (p.done < kHdr + p.len) break;
      uint64_t op = p.op;
      s.recvq.pop_front();
      partDone(recvOps_, &recvBase_, op);
    }
    if (got > total) {  // the rest went to the spill buffer
      s.spillHead = 0;
      s.spillLen = got - total;
      return Status::ok();
    }
    if (got < total) return Status::ok();  // drained
    if (s.recvq.empty()) return Status::ok();
  }
}

Status TcpPeer::onEvent(int sock, uint32_t events) {
  if (!state_.live() || sock < 0 || sock >= nsocks_) return state_.failed();
  Stream& s = streams_[sock];
  if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && !s.sendq.empty())
    WEFT_RETURN_IF_ERROR(flushSend(s));
  if (!s.recvq.empty() || ((events & EPOLLIN) && s.spillLen == 0)) {
    // With nothing posted, a message that arrives early goes to the spill
    // buffer (up to kSpill bytes) instead of waking every poll until posted.
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
      WEFT_RETURN_IF_ERROR(flushRecv(s, sock));
  } else if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    // Nothing posted: the bytes before the hangup (if any) stay for later
    // recvs; stop watching the stream so a closed peer cannot spin us.
    markHup(s, sock);
  }
  return Status::ok();
}

Status TcpPeer::pollHungUp() {
  if (!state_.live()) return state_.failed();
  for (int i = 0; i < nsocks_; ++i) {
    Stream& s = streams_[i];
    if (!s.hup) continue;
    if (!s.recvq.empty()) WEFT_RETURN_IF_ERROR(flushRecv(s, i));
    if (!s.sendq.empty()) {
      WEFT_RETURN_IF_ERROR(flushSend(s));
      if (!s.sendq.empty()) return lost("closed by the peer while sending");
    }
  }
  return Status::ok();
}

Status TcpPeer::check() {
  if (!state_.live()) return state_.failed();
  for (Stream& s : streams_) {
    if (s.hup) return lost("closed by the peer");
    pollfd p{s.fd, POLLRDHUP, 0};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      return lost(err ? strerror(err) : "closed by the peer");
    }
  }
  return Status::ok();
}

Status TcpPeer::lost(const std::string& why) {
  return fail(Status(WEFT_ERR_REMOTE, strFormat("connection to rank %d (%s) lost: %s", peer_,
                                                remote_.c_str(), why.c_str())));
}

Status TcpPeer::fail(const Status& st) {
  state_.fail(st);
  for (Stream& s : streams_) {
    s.sendq.clear();
    s.recvq.clear();
    if (!s.hup && s.fd >= 0) epoll_ctl(epfd_, EPOLL_CTL_DEL, s.fd, nullptr);
    s.hup = true;  // out of the epoll set for good
  }
  hups_ = 0;
  dropOps(sendOps_, &st);
  dropOps(recvOps_, &st);
  sendBase_ = sendSeq_;
  recvBase_ = recvSeq_;
  return st;
}

// Forgets every operation; completes the unfinished ones with *st if given.
void TcpPeer::dropOps(RingQueue<Op>& ops, const Status* st) {
  while (!ops.empty()) {
    if (ops.front().partsLeft > 0) {
      --*pending_;
      if (st) ops.front().c->finish(*st);
    }
    ops.pop_front();
  }
}

void TcpPeer::hangUp() {
  for (Stream& s : streams_)
    if (s.fd >= 0) ::shutdown(s.fd, SHUT_RDWR);
}

void TcpPeer::abort() {
  state_.abort();
  for (Stream& s : streams_) {
    s.sendq.clear();
    s.recvq.clear();
    s.spillLen = 0;
    net::closeFd(&s.fd);
  }
  dropOps(sendOps_, nullptr);
  dropOps(recvOps_, nullptr);
  sendBase_ = sendSeq_;
  recvBase_ = recvSeq_;
}

}  // namespace tcp
}  // namespace weft
